#!/usr/bin/env python3
"""How corpus21b/ and holdout21b/ were split (issue 21, second batch), kept for the record.

The 75 bodies gathered in the second round were numbered in collection order
(the NNN prefix of each file). A third was set aside, before any rule or
lexicon entry was written from this batch, by Python's
random.Random(212).sample over the indices. Running this prints the holdout
indices; they match the NNN prefixes in holdout21b/.
"""
import random

N, SEED = 75, 212
print(sorted(random.Random(SEED).sample(range(N), N // 3)))
