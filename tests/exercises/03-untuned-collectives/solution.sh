#!/bin/sh
# Reference solution of exercise 3: two channels per peer, one on each NIC port.
# $1 = the student's scenario copy. No rebuild needed.
set -eu
sed -i 's/^channels = 1$/channels = 2/' "$1"
grep -q '^channels = 2$' "$1"
