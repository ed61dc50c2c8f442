#!/bin/sh
# Reference solution of exercise 8: the job talks over the rail. $1 = the student's scenario copy.
set -eu
sed -i 's/^tier = "frontend"/tier = "rail"/' "$1"
grep -q '^tier = "rail"' "$1"
