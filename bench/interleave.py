#!/usr/bin/python3
"""Whole-process wall time of one command under several environments, measured in turn.

hyperfine runs all rounds of one command before the next, and this machine's speed shifts for minutes
at a time, so two commands measured that way can differ by the shift alone. Here every round runs each
configuration once, in turn, each pinned to one CPU from inside the child (sched_setaffinity in a
preexec hook: a `taskset` wrapper would be what a preloaded profiler sees and traces), and the report
gives medians and minimums, each configuration's added time (over `bare`, always measured) as a
share of the reference configuration's, the median peak resident set of the command's process
(Linux keeps that maximum across exec, so it includes the forked copy of this script, about 10 MiB:
a figure near that floor says only that the command stayed below it), the median of its minor
page faults as getrusage counts them (pages faulted in ahead with MADV_POPULATE_WRITE included,
which `perf stat -e page-faults` leaves out; the forked copy's before exec too, about 200 here), and
the median of its CPU time, user and system (the forked copy's too): steadier than wall time on a
machine whose other tenants take turns with it.

  bench/interleave.py --rounds 11 --reference heaptrack \\
      --config 'heaptrack LD_PRELOAD=/usr/lib/heaptrack/libheaptrack_preload.so DUMP_HEAPTRACK_OUTPUT=/tmp/ht.raw' \\
      --config 'poolscope LD_PRELOAD=bazel-bin/interpose/libpoolscope.so POOLSCOPE_OPTIONS=track=1:stack_depth=16:quiet=1:report=none' \\
      -- bazel-bin/bench/malloc_loop 2000000 20

A configuration is a name and KEY=VALUE words for the environment, except WRAP=PROGRAM[,ARG...]: a
command put in front of the measured one for that configuration alone, e.g. heaptrack's launcher,
which records through a pipe into its interpreter as users run it:

  bench/interleave.py --cpu all --reference heaptrack --config 'heaptrack WRAP=/usr/bin/heaptrack' ...

`--ratios` adds a table of each configuration's median time and median peak RSS over bare's and
over the reference's (whole figures, not added time: `1.05x` is 5% slower).

`--cpu all` leaves every run free to use every CPU (the launcher's interpreter then runs beside the
program, as on a user's machine). The command's output is discarded; a round that fails stops the
run with its exit status.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time


def parse_config(text):
    words = text.split()
    if not words or "=" in words[0]:
        raise argparse.ArgumentTypeError("a configuration starts with its name: %r" % text)
    env = {}
    for word in words[1:]:
        key, sep, value = word.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError("not KEY=VALUE: %r in %r" % (word, text))
        env[key] = value
    return words[0], env


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=11, help="rounds (default 11)")
    parser.add_argument("--cpu", default="1", help="CPU to pin each run to (default 1), or 'all': not pinned")
    parser.add_argument("--config", type=parse_config, action="append", default=[],
                        help="'NAME KEY=VALUE ...' (repeatable)")
    parser.add_argument("--reference", help="the configuration whose added time the others are compared to")
    parser.add_argument("--ratios", action="store_true",
                        help="also print median time and peak RSS as ratios to bare and to the reference")
    parser.add_argument("--unset", action="append", default=["LD_PRELOAD", "POOLSCOPE_OPTIONS"],
                        help="variables removed from every configuration's environment first")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ARGS...")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given (after --)")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    configs = [("bare", {})] + args.config
    names = [name for name, _ in configs]
    if len(set(names)) != len(names):
        parser.error("configuration names must differ (bare is taken)")
    if args.reference is not None and args.reference not in names:
        parser.error("--reference %s is not a configuration" % args.reference)

    base_env = {k: v for k, v in os.environ.items() if k not in args.unset}
    times = {name: [] for name in names}
    peak_kib = {name: [] for name in names}  # the command's own peak resident set (its children's not)
    faults = {name: [] for name in names}  # minor page faults of the command's process
    cpu_s = {name: [] for name in names}  # its CPU time, user and system, seconds
    if args.cpu == "all":
        pin = None
    elif args.cpu.isdigit():
        cpu = int(args.cpu)
        pin = lambda: os.sched_setaffinity(0, {cpu})  # noqa: E731
    else:
        parser.error("--cpu takes a CPU number or 'all', not %r" % args.cpu)
    for _ in range(args.rounds):
        for name, extra in configs:
            env = dict(base_env)
            env.update(extra)
            wrap = env.pop("WRAP", "")
            argv = [w for w in wrap.split(",") if w] + command
            start = time.perf_counter()
            child = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     preexec_fn=pin)
            _, status, usage = os.wait4(child.pid, 0)
            elapsed = time.perf_counter() - start
            child.returncode = os.waitstatus_to_exitcode(status)  # (so Popen does not wait again)
            if child.returncode != 0:
                print("interleave.py: %s exited with status %d" % (name, child.returncode), file=sys.stderr)
                return child.returncode if child.returncode > 0 else 1
            times[name].append(elapsed)
            peak_kib[name].append(usage.ru_maxrss)
            faults[name].append(usage.ru_minflt)
            cpu_s[name].append(usage.ru_utime + usage.ru_stime)

    median = {name: statistics.median(t) for name, t in times.items()}
    bare = median["bare"]
    reference = median[args.reference] - bare if args.reference else None
    print("%d rounds of: %s%s" % (args.rounds, " ".join(command), "" if pin else " (not pinned)"))
    for name in names:
        line = "%-16s median %10.1f ms   min %10.1f ms   cpu %10.1f ms   peak RSS %8.1f MiB   faults %8d" % (
            name, median[name] * 1e3, min(times[name]) * 1e3, statistics.median(cpu_s[name]) * 1e3,
            statistics.median(peak_kib[name]) / 1024, statistics.median(faults[name]))
        if name != "bare":
            added = median[name] - bare
            line += "   added %9.1f ms" % (added * 1e3)
            if reference and name != args.reference:
                line += "   %5.0f%% of %s's" % (100 * added / reference, args.reference)
        print(line)
    if args.ratios:
        rss = {name: statistics.median(kib) for name, kib in peak_kib.items()}
        ref = args.reference
        print("ratios of medians      time / bare   RSS / bare%s" % (
            "   time / %s   RSS / %s" % (ref, ref) if ref else ""))
        for name in names[1:]:
            line = "%-20s %11.2fx %11.2fx" % (name, median[name] / bare, rss[name] / rss["bare"])
            if ref:
                line += "   %*.2fx   %*.2fx" % (7 + len(ref) - 1, median[name] / median[ref],
                                                6 + len(ref) - 1, rss[name] / rss[ref])
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
