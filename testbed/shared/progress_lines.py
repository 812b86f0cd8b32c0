"""The progress file's lines, `<rank> <round> <monotonic seconds it ended>`: every agent appends
one per finished round; the runner's watchdog and the jobs' first ranks read them."""

from __future__ import annotations


def progress_line(rank: int, round_: int, ended_s: float) -> str:
    return f"{rank} {round_} {ended_s:.6f}\n"


def parse_progress(text: str) -> list[tuple[int, int, float]]:
    """(rank, round, when it ended) of every whole line; a line still being written is skipped."""
    found = []
    for line in text.split("\n")[:-1]:
        fields = line.split()
        if len(fields) != 3 or not (fields[0].isdigit() and fields[1].isdigit()):
            continue
        try:
            found.append((int(fields[0]), int(fields[1]), float(fields[2])))
        except ValueError:
            continue
    return found
