"""The fork server fills the free blocks of the small-object allocator's partly used pools before it
forks (``fill_free_blocks``): a child's new objects then go to pools of its own instead of into the
free slots of pages it shares with the server, each of which a write copies whole."""

from __future__ import annotations

from goondan.executors.process._forkserver import fill_free_blocks, free_blocks


def test_free_blocks_reads_the_allocators_table_of_every_small_block_size() -> None:
    table = free_blocks()
    assert sorted(table) == list(range(16, 513, 16))  # CPython 3.11: 32 size classes of 16 bytes
    assert all(n >= 0 for n in table.values())


def test_fill_free_blocks_takes_most_free_blocks_of_the_sizes_it_can_fill() -> None:
    # free blocks in partly used pools: objects made and dropped leave holes in shared pools
    holes = [[bytes(size - 33) for _ in range(400)] for size in range(48, 513, 16)]
    for row in holes:
        del row[::2]
    before = sum(n for size, n in free_blocks().items() if size >= 48)
    kept = fill_free_blocks()
    after = sum(n for size, n in free_blocks().items() if size >= 48)
    assert before > 3000
    assert after < before / 4, (before, after)
    assert kept
