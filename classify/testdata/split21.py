#!/usr/bin/env python3
"""How corpus21/ and holdout21/ were split (issue 21), kept for the record.

The 72 bodies were numbered in collection order (the NNN prefix of each
file). A third was set aside, before any rule of the signal layer was
written, by Python's random.Random(21).sample over the indices. Running this
prints the holdout indices; they match the NNN prefixes in holdout21/.
"""
import random

N, SEED = 72, 21
print(sorted(random.Random(SEED).sample(range(N), N // 3)))
