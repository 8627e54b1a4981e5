#!/usr/bin/env python3
"""How corpus21d/ and holdout21d/ were split (issue 21, fourth round), kept for the record.

The 43 bodies gathered in the fourth round (2025-2026, GitHub issues and
vendor or gateway docs, none of them a body or a source already in
testdata/: 60 more gathered first were found to be and were dropped before
the split) were numbered in collection order (the NNN prefix of each file).
A third was set aside, before any rule or lexicon entry was written from
them, by Python's random.Random(214).sample over the indices; the rest is
corpus21d/. Running this prints the holdout indices; they match the NNN
prefixes in holdout21d/.
"""
import random

N, HELD, SEED = 43, 14, 214
print(sorted(random.Random(SEED).sample(range(N), HELD)))
