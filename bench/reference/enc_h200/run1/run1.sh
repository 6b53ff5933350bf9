#!/bin/bash
# Issue 11 enc, run 1: the tests (run1a.sh), then the speed A/B (run1b.sh), in one device call.
cd "$(dirname "$0")"
DEADLINE=250 bash ./run1a.sh
DEADLINE=270 bash ./run1b.sh
