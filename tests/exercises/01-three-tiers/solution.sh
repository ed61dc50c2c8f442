#!/bin/sh
# Reference solution of exercise 1: the three pairs' tiers and the lab's figures as `status`
# shows them (NVLink 7.2 Gbit/s, delays under 10 us not emulated; the rail 400 Mbit/s; across
# regions the VPC's 25 Mbit/s and 2 x 250 us + 2 x 250 us + 25 ms of delay).
# $1 = the student's scenario copy; the measurements file lies beside it.
set -eu
cat > "$(dirname "$1")/measurements.toml" <<'TOML'
[[pair]]
a = "hz/s0/g0"
b = "hz/s0/g1"
tier = "nvl"
rate = "7.2gbit"
delay = "0"

[[pair]]
a = "hz/s0/g0"
b = "hz/s1/g0"
tier = "rail"
rate = "400mbit"
delay = "0"

[[pair]]
a = "hz/s0/g0"
b = "bj/s0/g0"
tier = "frontend"
rate = "25mbit"
delay = "26ms"
TOML
