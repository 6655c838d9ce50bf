#!/bin/bash
# perl (hashes, regexes, string building) bare, pool=0 and pool=1: same stdout, stderr and exit
# status (5); one report per run, complete and balanced.
# Args: LIB CHECKER
source "$(dirname "$0")/integration_lib.sh"
integration_init "$1" "$2"
script='
my %h;
for my $i (1 .. 30000) { my $k = "key$i"; $h{$k} = join(",", map { $_ * $i } 1 .. 5); }
my $n = 0;
for my $k (sort keys %h) { $n++ if $h{$k} =~ /^(\d+),(\d+)/ && $2 == 2 * $1; }
my $s = join("", map { sprintf("%x", $_) } 1 .. 20000);
(my $t = $s) =~ s/([a-f]+)/uc($1)/ge;
my @w = split /[0-9]+/, $t;
my %seen; $seen{$_}++ for @w;
my @top = (sort { $seen{$b} <=> $seen{$a} || $a cmp $b } grep { length } keys %seen)[0 .. 4];
delete $h{"key$_"} for 1 .. 10000;
print "perl: n=$n len=", length($t), " words=", scalar(@w), " keys=", scalar(keys %h), " top=@top\n";
exit 5;
'
run_three perl /dev/null PERL_HASH_SEED=0 -- /usr/bin/perl -e "$script"
[ "$(cat "$WORK/perl/bare/status")" = 5 ] || fail "the bare perl run exited $(cat "$WORK/perl/bare/status"), expected 5"
standard_checks perl 'perl*'
echo PASS
