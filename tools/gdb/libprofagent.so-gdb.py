# SPDX-License-Identifier: MIT
# gdb support for programs profiled by profd: instrumented functions return
# through their stub's exit landing (x86-64: slot+5, which jumps to
# profagent_exit_trampoline) or the exit trampoline itself (aarch64), whose
# CFI cannot name the real caller (it lives in the agent's per-thread shadow
# stack). This unwinder reads the shadow stack to continue the walk at the
# true caller, and the frame filter hides those frames, so `bt` shows the
# program's own call chain.
# Auto-loaded from next to libprofagent.so, or: source libprofagent.so-gdb.py
import gdb
import gdb.unwinder
from gdb.FrameDecorator import FrameDecorator

TRAMPOLINES = ("profagent_exit_trampoline", "profagent_entry_trampoline")
# x86-64 stub slots (trampolines/trampoline_layout.h): the landing is slot+5
STUB_SLOT_SIZE, STUB_LANDING_OFFSET = 64, 5


def _symbol_address(name):
    sym = gdb.lookup_static_symbol(name) or gdb.lookup_global_symbol(name)
    if sym is not None:
        return int(sym.value().address)
    try:
        return int(gdb.parse_and_eval("(unsigned long)&" + name))
    except gdb.error:
        return None


def _live_entries():
    """(index, entry) of the current thread's open calls, innermost first."""
    try:
        thread = gdb.parse_and_eval("agent_current_thread")
    except gdb.error:
        return
    if int(thread) == 0:
        return
    # state = ring head << 16 | shadow depth (agent/agent_thread.h)
    state = int(thread["committed"])
    head, depth = state >> 16, state & 0xFFFF
    shadow = thread["shadow"]
    for i in range(depth - 1, -1, -1):
        if int(shadow[i]["exit_head"]) < head:
            continue  # closed below the top, popped later
        yield thread, i, shadow[i]


def _landing(thread, i):
    """What the enter hook wrote into entry i's return slot (x86-64)."""
    try:
        return int(thread["landing"][i])
    except gdb.error:
        return None  # aarch64: the exit trampoline


def _real_return_address(return_slot, pc, exit_trampoline):
    """The caller's address saved for the frame whose return slot is given,
    when pc is where that hijacked return went."""
    for thread, i, entry in _live_entries():
        if int(entry["return_slot"]) == return_slot:
            if pc == exit_trampoline or pc == _landing(thread, i):
                return int(entry["return_address"])
            return None
    return None


def _is_landing(pc):
    if pc % STUB_SLOT_SIZE != STUB_LANDING_OFFSET:
        return False
    return any(_landing(thread, i) == pc for thread, i, _ in _live_entries())


def _is_trampoline(pc):
    """The asm has no DWARF function entries: ask the minimal symbols."""
    try:
        where = gdb.execute("info symbol %#x" % pc, to_string=True)
    except gdb.error:
        return False
    return where.split(" ")[0] in TRAMPOLINES


def _is_profiler_frame(pc):
    return _is_trampoline(pc) or _is_landing(pc)


class _FrameId:
    """What create_unwind_info() wants (gdb 13 has no gdb.unwinder.FrameId)."""

    def __init__(self, sp, pc):
        self.sp = sp
        self.pc = pc


class ProfagentUnwinder(gdb.unwinder.Unwinder):
    def __init__(self):
        super().__init__("profagent")

    def __call__(self, pending_frame):
        exit_trampoline = _symbol_address("profagent_exit_trampoline")
        if exit_trampoline is None:
            return None
        pc = int(pending_frame.read_register("rip"))
        if pc != exit_trampoline and pc % STUB_SLOT_SIZE != STUB_LANDING_OFFSET:
            return None
        sp = int(pending_frame.read_register("rsp"))
        real = _real_return_address(sp - 8, pc, exit_trampoline)
        if real is None:
            return None
        info = pending_frame.create_unwind_info(_FrameId(gdb.Value(sp), gdb.Value(pc)))
        info.add_saved_register("rip", gdb.Value(real))
        info.add_saved_register("rsp", pending_frame.read_register("rsp"))
        info.add_saved_register("rbp", pending_frame.read_register("rbp"))
        return info


class ProfagentFrameFilter:
    def __init__(self):
        self.name = "profagent"
        self.priority = 100
        self.enabled = True
        gdb.frame_filters[self.name] = self

    def filter(self, frames):
        for frame in frames:
            if not _is_profiler_frame(frame.inferior_frame().pc()):
                yield frame


gdb.unwinder.register_unwinder(None, ProfagentUnwinder(), replace=True)
ProfagentFrameFilter()
