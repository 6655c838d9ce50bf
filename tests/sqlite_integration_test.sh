#!/bin/bash
# sqlite3 (a table, a few thousand rows inserted in one transaction, GROUP BY, an index) bare,
# pool=0 and pool=1: same stdout, stderr and exit status; one report per run, complete and balanced.
# Args: LIB CHECKER
source "$(dirname "$0")/integration_lib.sh"
integration_init "$1" "$2"
sql=$WORK/script.sql
cat >"$sql" <<'SQL'
CREATE TABLE t(id INTEGER PRIMARY KEY, grp INTEGER, name TEXT, val REAL);
BEGIN;
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 4000)
INSERT INTO t(grp, name, val) SELECT x % 17, 'name-' || x, x * 1.5 FROM c;
INSERT INTO t(grp, name, val) VALUES (100, 'single-a', 1.0);
INSERT INTO t(grp, name, val) VALUES (100, 'single-b', 2.0);
INSERT INTO t(grp, name, val) VALUES (101, 'single-c', 3.0);
COMMIT;
SELECT grp, count(*), sum(val), min(name), max(name) FROM t GROUP BY grp ORDER BY grp;
CREATE INDEX t_name ON t(name);
SELECT count(*) FROM t WHERE name LIKE 'name-1%';
SELECT group_concat(name, ';') FROM (SELECT name FROM t WHERE grp = 3 ORDER BY name LIMIT 20);
UPDATE t SET name = upper(name) WHERE grp % 2 = 0;
DELETE FROM t WHERE grp = 5;
SELECT count(*), sum(length(name)) FROM t;
SQL
run_three sqlite "$sql" -- /usr/bin/sqlite3 -batch test.db
standard_checks sqlite 'sqlite3*'
echo PASS
