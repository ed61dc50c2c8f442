#!/bin/sh
# Reference solution of exercise 7: QoS classes on the WAN, the checkpoint in bronze, and
# incremental replications. $1 = the student's scenario copy. The lab must be rebuilt
# (exercise start) for the classes.
set -eu
sed -i -e 's/^enabled = false/enabled = true/' \
  -e 's/^mode = "full"/mode = "incremental"\nqos = "bronze"/' "$1"
grep -q '^enabled = true' "$1"
grep -q '^mode = "incremental"' "$1"
grep -q '^qos = "bronze"' "$1"
