# SPDX-License-Identifier: MIT
# gdb support for programs profiled by profd: instrumented functions return
# through profagent_exit_trampoline, whose CFI cannot name the real caller
# (it lives in the agent's per-thread shadow stack). This unwinder reads the
# shadow stack to continue the walk at the true caller, and the frame filter
# hides the trampoline frames, so `bt` shows the program's own call chain.
# Auto-loaded from next to libprofagent.so, or: source libprofagent.so-gdb.py
import gdb
import gdb.unwinder
from gdb.FrameDecorator import FrameDecorator

TRAMPOLINES = ("profagent_exit_trampoline", "profagent_entry_trampoline")


def _symbol_address(name):
    sym = gdb.lookup_static_symbol(name) or gdb.lookup_global_symbol(name)
    if sym is not None:
        return int(sym.value().address)
    try:
        return int(gdb.parse_and_eval("(unsigned long)&" + name))
    except gdb.error:
        return None


def _real_return_address(return_slot):
    """The caller's address saved for the frame whose return slot is given."""
    try:
        thread = gdb.parse_and_eval("agent_current_thread")
    except gdb.error:
        return None
    if int(thread) == 0:
        return None
    # state = ring head << 16 | shadow depth (agent/agent_thread.h)
    state = int(thread["committed"])
    head, depth = state >> 16, state & 0xFFFF
    shadow = thread["shadow"]
    for i in range(depth - 1, -1, -1):
        if int(shadow[i]["exit_head"]) < head:
            continue  # closed below the top, popped later
        if int(shadow[i]["return_slot"]) == return_slot:
            return int(shadow[i]["return_address"])
    return None


def _is_trampoline(pc):
    """The asm has no DWARF function entries: ask the minimal symbols."""
    try:
        where = gdb.execute("info symbol %#x" % pc, to_string=True)
    except gdb.error:
        return False
    return where.split(" ")[0] in TRAMPOLINES


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
        if pc != exit_trampoline:
            return None
        sp = int(pending_frame.read_register("rsp"))
        real = _real_return_address(sp - 8)
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
            if not _is_trampoline(frame.inferior_frame().pc()):
                yield frame


gdb.unwinder.register_unwinder(None, ProfagentUnwinder(), replace=True)
ProfagentFrameFilter()
