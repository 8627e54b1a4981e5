#!/usr/bin/env python3
"""How corpus21c/ and holdout21c/ were split (issue 21, third round), kept for the record.

The 31 bodies gathered in the third round were numbered in collection order
(the NNN prefix of each file), none of them a body already in testdata/
(two gathered first were found to be, were dropped before the split and
two more were gathered at the end).
Thirty were set aside, before any rule or lexicon entry was written in this
round, by Python's random.Random(213).sample over the indices; the one left
is corpus21c/. Running this prints the holdout indices; they match the NNN
prefixes in holdout21c/. Bodies numbered 100 and up in corpus21c/ were added
after the split, read for the three shapes holdout21b still missed; they are
training bodies, not part of the split.
"""
import random

N, HELD, SEED = 31, 30, 213
print(sorted(random.Random(SEED).sample(range(N), HELD)))
