#!/bin/sh
# Reference solution of exercise 5: two ToRs per rail (host routes withdrawn by default).
# $1 = the student's scenario copy. The lab must be rebuilt (exercise start).
set -eu
sed -i 's/^dual_tor = false/dual_tor = true/' "$1"
grep -q '^dual_tor = true' "$1"
