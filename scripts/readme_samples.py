#!/usr/bin/env python3
"""The README's samples, made from the current build.

README.md holds two samples between marker lines, each the output of a command run now:
  <!-- sample: compare -->  `poolscope compare` on the bundled demo workload (the main job);
  <!-- sample: report -->   `poolscope report` on the demo workload's pooled run, TOTALS to DETECTOR VIEW.
and the screenshot docs/images/report.png: that run's HTML page in headless Chromium.

  scripts/readme_samples.py --write     rewrites the samples and the screenshot (builds first)
  scripts/readme_samples.py --check     fails, showing the lines, when a sample no longer matches what
                                        the build prints (figures aside: counts and times vary by run)

--poolscope, --demo and --lib name the build's files (the test passes its runfiles); without them the
script builds //tools:poolscope, //tools:demo_workload and //interpose:libpoolscope.so and uses those.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

# The report sample: its sections from the totals to the detector's view (the process header above them
# names this machine's paths).
REPORT_FIRST, REPORT_AFTER = "TOTALS", "CALL SITES"
SCREENSHOT_SIZE = "1200,1600"


def build(root):
    subprocess.run(["bazel", "build", "//tools:poolscope", "//tools:demo_workload", "//interpose:libpoolscope.so"],
                   cwd=root, check=True)
    bin_dir = subprocess.run(["bazel", "info", "bazel-bin"], cwd=root, check=True, capture_output=True,
                             text=True).stdout.strip()
    return (os.path.join(bin_dir, "tools/poolscope"), os.path.join(bin_dir, "tools/demo_workload"),
            os.path.join(bin_dir, "interpose/libpoolscope.so"))


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit("readme_samples: %s exited %d:\n%s" % (" ".join(cmd), r.returncode, r.stderr))
    return r


def samples(poolscope, demo, lib, work):
    """The samples' texts, and the pooled run's report (for the screenshot)."""
    compare = run([poolscope, "compare"], cwd=work)
    compare_text = compare.stdout  # (its progress lines go to stderr)
    report = os.path.join(work, "demo_on.json")
    env = dict(os.environ, LD_PRELOAD=lib, POOLSCOPE_OPTIONS="quiet=1:report=" + report)
    run([demo], env=env, cwd=work)
    text = run([poolscope, "report", "demo_on.json"], cwd=work).stdout
    lines = text.splitlines()
    starts = [i for i, l in enumerate(lines) if l.startswith(REPORT_FIRST)]
    ends = [i for i, l in enumerate(lines) if l.startswith(REPORT_AFTER)]
    if not starts or not ends:
        sys.exit("readme_samples: the report has no %s or no %s section" % (REPORT_FIRST, REPORT_AFTER))
    head = "\n".join(lines[starts[0]:ends[0]]).rstrip("\n") + "\n"
    # Temporary folders have a random suffix: shown as mkdtemp's template.
    compare_text = re.sub(r"/poolscope\.[A-Za-z0-9]{6}", "/poolscope.XXXXXX", compare_text)
    return {"compare": compare_text, "report": head}, report


def blocks(readme):
    """name -> (start, end) line indexes of the fenced text inside each marked sample."""
    lines = readme.split("\n")
    found = {}
    for i, line in enumerate(lines):
        m = re.match(r"<!-- sample: (\w+) -->$", line)
        if not m:
            continue
        if i + 1 >= len(lines) or lines[i + 1] != "```":
            sys.exit("readme_samples: README.md:%d: a sample marker must be followed by a ``` line" % (i + 1))
        end = next((j for j in range(i + 2, len(lines)) if lines[j] == "```"), None)
        if end is None:
            sys.exit("readme_samples: README.md:%d: the sample's ``` block never ends" % (i + 1))
        found[m.group(1)] = (i + 2, end)
    return lines, found


def shape(text):
    """A text with its figures taken out: numbers (with their units and signs) become #, a noun after
    one the same in the singular and the plural, runs of spaces one space, hex checksums H. Two runs of
    one build print the same shape; a changed row, word or section does not."""
    out = []
    for line in text.rstrip("\n").split("\n"):
        line = re.sub(r"\b[0-9a-f]{16}\b", "H", line)
        line = re.sub(r"\([+-]?[0-9][0-9,.]*%\)", "", line)
        line = re.sub(r"[+-]?[0-9][0-9,.]*( ?(B|KiB|MiB|GiB|s|ms|%))?(?![A-Za-z])", "#", line)
        line = re.sub(r"# #", "#", line)
        line = re.sub(r"# (block|pool|thread|call|site|group|frame|object|process)(es|s)?\b", r"# \1(s)", line)
        line = re.sub(r"-{3,}", "---", line)  # a rule as wide as its column's figures
        line = re.sub(r"\s+", " ", line).strip()
        out.append(line)
    return out


def screenshot(poolscope, report, path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("readme_samples: chromium is not installed (apt-get install -y chromium)")
    with tempfile.TemporaryDirectory() as t:
        page = os.path.join(t, "report.html")
        with open(page, "w") as f:
            f.write(run([poolscope, "report", report, "--format=html"]).stdout)
        png = os.path.join(t, "shot.png")
        run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--window-size=" + SCREENSHOT_SIZE, "--screenshot=" + png, "file://" + page])
        shutil.copyfile(png, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true")
    mode.add_argument("--check", action="store_true")
    ap.add_argument("--readme", default=None)
    ap.add_argument("--poolscope")
    ap.add_argument("--demo")
    ap.add_argument("--lib")
    a = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    readme_path = a.readme or os.path.join(root, "README.md")
    if a.poolscope and a.demo and a.lib:
        poolscope, demo, lib = (os.path.abspath(p) for p in (a.poolscope, a.demo, a.lib))
    else:
        poolscope, demo, lib = build(root)
    readme = open(readme_path).read()
    lines, found = blocks(readme)
    with tempfile.TemporaryDirectory() as work:
        texts, report = samples(poolscope, demo, lib, work)
        missing = sorted(set(texts) - set(found))
        if missing:
            sys.exit("readme_samples: README.md has no sample marker for: " + ", ".join(missing))
        if a.check:
            failed = False
            for name, text in texts.items():
                start, end = found[name]
                want, got = shape(text), shape("\n".join(lines[start:end]))
                if want != got:
                    failed = True
                    print("README.md's %s sample differs from what the build prints "
                          "(figures aside); run scripts/readme_samples.py --write" % name)
                    for i in range(max(len(want), len(got))):
                        w = want[i] if i < len(want) else "<none>"
                        g = got[i] if i < len(got) else "<none>"
                        if w != g:
                            print("  line %d:\n    README: %s\n    build:  %s" % (i + 1, g, w))
                            break
            sys.exit(1 if failed else 0)
        # Last block first, so earlier line indexes stay right.
        for name in sorted(texts, key=lambda n: found[n][0], reverse=True):
            start, end = found[name]
            lines[start:end] = texts[name].rstrip("\n").split("\n")
        open(readme_path, "w").write("\n".join(lines))
        screenshot(poolscope, report, os.path.join(root, "docs/images/report.png"))
    print("README.md samples and docs/images/report.png written")


if __name__ == "__main__":
    main()
