"""Error codes of the core: the one description shared by the RTL (``rtl/core/status.py``, the
DMA), the host driver (``sim/host.py``) and the table in ``docs/errors.md``.

An error is reported as three values latched in the status block until the host clears them:
``ERR_CODE`` (one of :class:`ErrorCode`), ``ERR_ADDR`` (a byte address or instruction address,
see ``addr_meaning``) and ``ERR_INFO`` (a code-specific detail word). The first error wins:
errors that arrive while one is latched are counted in ``ERR_COUNT`` but do not overwrite it.

Codes are part of the memory map: never renumber. This module imports neither Amaranth nor
cocotb.
"""

import enum
from dataclasses import dataclass

__all__ = ["ERROR_CODE_BITS", "ErrorCode", "ErrorInfo", "ERRORS", "SEQUENCER_ERROR_MAP",
           "describe"]

#: Width in bits of an error code in RTL ports and in the ``ERR_CODE`` register.
ERROR_CODE_BITS = 4


class ErrorCode(enum.IntEnum):
    """Error code (4 bits). 0 means no error."""
    NONE = 0
    ILLEGAL_INSTRUCTION = 1
    DMA_WINDOW = 2
    DMA_AXI_READ = 3
    DMA_AXI_WRITE = 4
    WATCHDOG = 5
    LUT_INDEX = 6
    SEMAPHORE = 7
    CALL_STACK = 8
    DMA_ALIGN = 9
    SBUF_RANGE = 10
    LOOP_STACK = 11
    PC_RANGE = 12
    DEADLOCK = 13
    MICRO_TRAP = 14


@dataclass(frozen=True)
class ErrorInfo:
    """What an error code means and what ``ERR_ADDR`` / ``ERR_INFO`` hold for it."""
    code: ErrorCode
    name: str
    summary: str
    addr_meaning: str
    info_meaning: str
    source: str


ERRORS = {e.code: e for e in [
    ErrorInfo(ErrorCode.NONE, "none", "No error.", "0", "0", "-"),
    ErrorInfo(ErrorCode.ILLEGAL_INSTRUCTION, "illegal instruction",
              "The sequencer fetched an instruction word whose opcode has no microroutine "
              "(ErrorBit ILLEGAL_OPCODE), or an engine instruction built a TENSOR/VECTOR "
              "record the core cannot run (ILLEGAL_FIELD: k, m, n, fmt out of range; vector "
              "alu/rnd/op out of range, REDUCE with another alu than ADD/MAX/MIN, TT with "
              "b_space=psum; docs/isa.md section 6). Nothing of the record is issued.",
              "program-memory word address of the instruction",
              "sequencer error bits (sim.isa.ErrorBit)", "sequencer"),
    ErrorInfo(ErrorCode.DMA_WINDOW, "DMA window violation",
              "A DMA transfer touches external memory outside every host-programmed window "
              "with the needed permission (read for loads, write for stores). Checked for the "
              "whole transfer before any bus access: no AXI transaction is issued.",
              "first byte address of the first offending row",
              "1 for a store (write permission needed), 0 for a load", "DMA"),
    ErrorInfo(ErrorCode.DMA_AXI_READ, "AXI read error response",
              "The external memory answered a DMA read with SLVERR or DECERR. The DMA stops "
              "issuing bursts, drains the outstanding ones and discards their data.",
              "byte address of the beat that carried the error", "RRESP (2 = SLVERR, 3 = DECERR)",
              "DMA"),
    ErrorInfo(ErrorCode.DMA_AXI_WRITE, "AXI write error response",
              "The external memory answered a DMA write burst with SLVERR or DECERR.",
              "start byte address of the burst", "BRESP (2 = SLVERR, 3 = DECERR)",
              "DMA"),
    ErrorInfo(ErrorCode.WATCHDOG, "watchdog timeout",
              "The program ran for more cycles than WATCHDOG_LIMIT; every engine was aborted.",
              "0", "the cycle limit", "watchdog"),
    ErrorInfo(ErrorCode.LUT_INDEX, "LUT index out of range",
              "A LUT configuration access or lookup used an index beyond the table.",
              "the table index", "0", "vector engine"),
    ErrorInfo(ErrorCode.SEMAPHORE, "semaphore misuse",
              "A semaphore was incremented past its maximum or decremented below zero.",
              "semaphore number", "0", "sequencer"),
    ErrorInfo(ErrorCode.CALL_STACK, "call-stack overflow",
              "A microcode or program call nested deeper than the return stack (or returned "
              "with an empty stack).",
              "address of the call/return", "stack depth", "sequencer"),
    ErrorInfo(ErrorCode.DMA_ALIGN, "DMA misaligned or malformed command",
              "A DMA command's external address or row stride is not a multiple of its element "
              "storage size, or its format code is invalid. No bus transaction is issued.",
              "the command's external address", "0", "DMA"),
    ErrorInfo(ErrorCode.SBUF_RANGE, "SBUF range",
              "A DMA command addresses SBUF words or partitions that do not exist. No bus "
              "transaction is issued.",
              "the command's SBUF address", "part_start + part_count", "DMA"),
    ErrorInfo(ErrorCode.LOOP_STACK, "loop-stack overflow",
              "Hardware loops nested deeper than the loop stack, or ENDLOOP without LOOP.",
              "address of the instruction", "sequencer error bits", "sequencer"),
    ErrorInfo(ErrorCode.PC_RANGE, "PC out of range",
              "The sequencer fetched beyond program memory (trapped in DECODE, the cycle "
              "after the fetch, on a registered compare).",
              "the PC", "sequencer error bits", "sequencer"),
    ErrorInfo(ErrorCode.DEADLOCK, "deadlock",
              "Every engine waits (e.g. on a semaphore that nothing will increment); detected "
              "by the sequencer.",
              "address of the waiting instruction", "sequencer error bits", "sequencer"),
    ErrorInfo(ErrorCode.MICRO_TRAP, "microcode trap",
              "A microroutine executed TRAP.",
              "address of the instruction", "sequencer error bits", "sequencer"),
]}

#: How the core maps the sequencer's sticky error bits (``sim.isa.ErrorBit`` names) to
#: codes; when several bits are set the lowest bit number decides.
SEQUENCER_ERROR_MAP = {
    "ILLEGAL_OPCODE": ErrorCode.ILLEGAL_INSTRUCTION,
    "CALL_OVERFLOW": ErrorCode.CALL_STACK,
    "CALL_UNDERFLOW": ErrorCode.CALL_STACK,
    "LOOP_OVERFLOW": ErrorCode.LOOP_STACK,
    "LOOP_UNDERFLOW": ErrorCode.LOOP_STACK,
    "UCALL_OVERFLOW": ErrorCode.CALL_STACK,
    "UCALL_UNDERFLOW": ErrorCode.CALL_STACK,
    "PC_RANGE": ErrorCode.PC_RANGE,
    "DEADLOCK": ErrorCode.DEADLOCK,
    "MICRO_TRAP": ErrorCode.MICRO_TRAP,
    "ILLEGAL_FIELD": ErrorCode.ILLEGAL_INSTRUCTION,
}


def describe(code):
    """Return the :class:`ErrorInfo` of ``code`` (an int or :class:`ErrorCode`).

    Unknown codes give an ``ErrorInfo`` named ``"unknown error <n>"`` rather than raising, so
    that a host driver talking to a newer core still reports something useful.
    """
    try:
        return ERRORS[ErrorCode(code)]
    except ValueError:
        return ErrorInfo(code, f"unknown error {code}", "Not documented by this driver.",
                         "?", "?", "?")
