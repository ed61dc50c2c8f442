#!/bin/sh
# Reference solution of exercise 6: the failover agent with 10 ms hellos, 3 misses.
# $1 = the student's scenario copy. The lab must be rebuilt (exercise start).
set -eu
sed -i 's/^mode = "link-state"/mode = "agent"\nprobe_interval = "10ms"\nmisses = 3/' "$1"
grep -q '^mode = "agent"' "$1"
