"""Which mappings the zygote remaps as huge pages."""

from runner import hugepages

MAPS = """\
55d0c0a00000-55d0c0a01000 r--p 00000000 fe:00 26723    /usr/bin/python3.11
55d0c0c00000-55d0c0c03000 rw-p 00003000 fe:00 26723    /usr/bin/python3.11
55d0c1001000-55d0c9435000 rw-p 00000000 00:00 0        [heap]
7f0000000000-7f0000400000 rw-p 00000000 00:00 0
7f0000400000-7f0000500000 rw-s 00000000 00:01 5        /dev/zero (deleted)
7f1000000000-7f1000100000 rw-p 00000000 00:00 0
7ffc0000000-7ffc0021000 rw-p 00000000 00:00 0          [stack]
"""


def test_only_whole_huge_pages_of_private_anonymous_memory():
    ranges = hugepages.anonymous_ranges(MAPS)
    huge = hugepages.HUGE
    assert ranges == [
        (0x55D0C1200000, 0x55D0C9400000),  # the heap, trimmed to 2 MiB boundaries
        (0x7F0000000000, 0x7F0000400000),  # an anonymous mapping, whole
    ]  # files, shared memory, the stack and small maps: no
    assert all(lo % huge == 0 and hi % huge == 0 for lo, hi in ranges)
