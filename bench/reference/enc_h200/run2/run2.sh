#!/bin/bash
# Issue 11 enc, run 2: the tests (run2a.sh), then the speed A/B (run2b.sh), in one device call.
cd "$(dirname "$0")"
DEADLINE=250 bash ./run2a.sh
DEADLINE=270 bash ./run2b.sh
