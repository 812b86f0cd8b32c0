"""Pipeline stage 3's actions on the registers: SwitchML's reserved slots with shadow copies, and
ATP's shared slots with fallback to end-host aggregation. Each returns what the deparser emits."""

from __future__ import annotations

from collections import Counter
from typing import Callable, NamedTuple

import numpy as np

from hosts.ina.parser import Header
from hosts.ina.protocol import FALLBACK, FLUSH, INT, MAX, OVERFLOW, RESULT, RETRANSMIT
from hosts.ina.registers import SlotRegisters
from hosts.ina.tables import JobEntry

OP_FLAGS_MASK = MAX | INT  # MAX and INT travel with the chunk into its result


class Emit(NamedTuple):
    to: tuple[str, ...]  # destination addresses (the job's multicast group, one worker, or its fallback)
    fallback: bool  # to the end-host aggregator's port rather than the workers'
    header: Header
    values: np.ndarray  # int32 in host order


def _result(regs: SlotRegisters, entry: JobEntry, ver: int, slot: int, seq: int, to: tuple[str, ...],
            counters: Counter) -> Emit:
    values, overflow = regs.result(ver, slot)
    if overflow:
        counters["overflow"] += 1
    flags = RESULT | regs.op[ver][slot] | (OVERFLOW if overflow else 0) | (RETRANSMIT if regs.late[ver][slot] else 0)
    header = Header(entry.job, 0, flags, slot, ver, regs.exp[ver][slot], seq, 0, regs.seen[ver][slot], values.size)
    return Emit(to, False, header, values)


def _seq_after(seq: int, held: int) -> int:
    """How far `seq` is past the chunk a copy holds (negative: older), in 32-bit serial number
    arithmetic so the comparison survives the header's sequence number wrapping; 1 for an empty copy."""
    if held < 0:
        return 1
    return (seq - held + (1 << 31)) % (1 << 32) - (1 << 31)


def reserved(regs: SlotRegisters, entry: JobEntry, h: Header, values: np.ndarray, counters: Counter) -> list[Emit]:
    """SwitchML: slot h.slot, copy h.ver. A worker's first packet for a copy clears its bit in the
    other copy (it has that copy's result); a retransmission whose bit is already set gets the
    result back if the copy is complete, and is dropped otherwise: nothing is summed twice.

    Each copy also remembers the chunk (sequence number) it holds, so a packet that arrives late,
    after its sender has moved on (a retransmission overtaken by the next chunk, which clears the
    sender's bit), is dropped as stale instead of overwriting a result others may still ask for:
    without it one reordered packet deadlocks the job (the copy is reloaded with an old chunk whose
    bit then blocks the sender's next one)."""
    ver, slot, bit = h.ver, h.slot, 1 << h.worker
    n = len(entry.workers)
    age = _seq_after(h.seq, regs.seq[ver][slot])
    if age < 0 or (age == 0 and regs.complete[ver][slot] and not regs.seen[ver][slot] & bit):
        counters["stale_dropped"] += 1
        return []
    if regs.seen[ver][slot] & bit and age == 0:
        if regs.complete[ver][slot]:
            counters["results_resent"] += 1
            return [_result(regs, entry, ver, slot, h.seq, (entry.workers[h.worker],), counters)]
        counters["duplicates_dropped"] += 1
        return []
    op = h.flags & OP_FLAGS_MASK
    if age > 0:  # a new use of the copy: only once the chunk it held is complete
        if regs.count[ver][slot] and not regs.complete[ver][slot]:
            counters["inconsistent_chunk"] += 1  # a worker ran more than a window ahead: never mix
            return []
        regs.load(ver, slot, bit, values, h.exp, op, h.seq)
        regs.late[ver][slot] = False
    else:
        if (values.size != regs.elements[ver][slot] or h.exp != regs.exp[ver][slot] or op != regs.op[ver][slot]):
            counters["inconsistent_chunk"] += 1  # workers disagree on the chunk: never mix them
            return []
        regs.accumulate(ver, slot, bit, values, bool(op & MAX))
    regs.seen[1 - ver][slot] &= ~bit
    regs.late[ver][slot] = regs.late[ver][slot] or bool(h.flags & RETRANSMIT)
    counters["aggregated"] += 1
    if regs.count[ver][slot] == n:
        regs.complete[ver][slot] = True
        counters["results_multicast"] += 1
        return [_result(regs, entry, ver, slot, h.seq, entry.workers, counters)]
    return []


def _spill(regs: SlotRegisters, key: tuple[int, int], bitmap: int, workers: int,
           workers_of: Callable[[int], int]) -> None:
    """Records that the workers in `bitmap` sent chunk `key` to the end host."""
    if bitmap == (1 << workers) - 1:
        regs.spilled.pop(key, None)
        return
    if key not in regs.spilled:
        # A chunk every worker of its job has moved past sends nothing more (a retransmission
        # of a chunk the end host already summed leaves such an entry behind).
        for old in [k for k in regs.spilled if regs.moved_past(k, workers_of)]:
            del regs.spilled[old]
    regs.spilled[key] = bitmap


def shared(regs: SlotRegisters, entry: JobEntry, h: Header, values: np.ndarray, counters: Counter,
           workers_of: Callable[[int], int]) -> list[Emit]:
    """ATP: chunk (job, seq) aggregates in slot h.slot if the slot is free or already its own.
    Otherwise (a collision) the packet goes to the job's end-host aggregator. A retransmission
    never starts or adds to a slot: it flushes the chunk's partial sum to the aggregator and
    follows it there, so each worker's contribution is summed in exactly one place."""
    slot, bit, key = h.slot, 1 << h.worker, (h.job, h.seq)
    n = len(entry.workers)
    low_key = (h.job, h.worker)
    if h.low_seq > regs.low_seq.get(low_key, 0):
        regs.low_seq[low_key] = h.low_seq
    to_fallback = Emit((entry.fallback,), True, h._replace(flags=h.flags | FALLBACK, bitmap=bit), values)
    retransmit = bool(h.flags & RETRANSMIT)
    if regs.owner[slot] == key:
        if regs.complete[0][slot]:
            counters["results_resent"] += 1
            return [_result(regs, entry, 0, slot, h.seq, (entry.workers[h.worker],), counters)]
        if retransmit:
            partial, _ = regs.result(0, slot)  # partial sums of int32 inputs stay in int32's range
            counters["flushes"] += 1
            flush = Emit((entry.fallback,), True,
                         Header(h.job, h.worker, FALLBACK | FLUSH | regs.op[0][slot], slot, 0, regs.exp[0][slot],
                                h.seq, h.low_seq, regs.seen[0][slot], partial.size), partial)
            out = [flush] if regs.seen[0][slot] & bit else [flush, to_fallback]
            _spill(regs, key, regs.seen[0][slot] | bit, n, workers_of)
            regs.owner[slot] = None
            return out
        if regs.seen[0][slot] & bit:
            counters["duplicates_dropped"] += 1
            return []
        op = h.flags & OP_FLAGS_MASK
        if values.size != regs.elements[0][slot] or h.exp != regs.exp[0][slot] or op != regs.op[0][slot]:
            counters["inconsistent_chunk"] += 1
            return []
        regs.accumulate(0, slot, bit, values, bool(op & MAX))
    elif retransmit or key in regs.spilled or not regs.reclaimable(slot, workers_of):
        if retransmit:
            counters["retransmits_to_fallback"] += 1
        elif key in regs.spilled:
            counters["collisions_followed"] += 1
        else:
            counters["collisions"] += 1  # once per chunk
        _spill(regs, key, regs.spilled.get(key, 0) | bit, n, workers_of)
        return [to_fallback]
    else:
        regs.owner[slot] = key
        regs.load(0, slot, bit, values, h.exp, h.flags & OP_FLAGS_MASK)
    counters["aggregated"] += 1
    if regs.count[0][slot] == n:
        regs.complete[0][slot] = True
        counters["results_multicast"] += 1
        return [_result(regs, entry, 0, slot, h.seq, entry.workers, counters)]
    return []

