"""AXI4 and AXI4-Lite interface signatures (manager's view: ``Out`` = driven by the manager).

Members carry the AXI names (``awaddr``, ``wvalid``...), so a port ``axil`` of a subordinate
appears in Verilog as ``axil__awaddr`` etc., which cocotbext-axi finds with the prefix
``"axil_"`` (``AxiLiteBus.from_prefix(dut, "axil_")``).
"""

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from sim.config import check_choice, check_int

__all__ = ["AXI4LiteSignature", "AXI4Signature", "RESP_OKAY", "RESP_EXOKAY", "RESP_SLVERR",
           "RESP_DECERR", "BURST_INCR", "AXI4_DATA_WIDTHS"]

RESP_OKAY = 0
RESP_EXOKAY = 1
RESP_SLVERR = 2
RESP_DECERR = 3
BURST_INCR = 1
#: The data widths of :class:`AXI4Signature`.
AXI4_DATA_WIDTHS = (32, 64, 128, 256, 512, 1024)


class AXI4LiteSignature(wiring.Signature):
    """AXI4-Lite, manager's view.

    Parameters
    ----------
    addr_width : int
        Address bits, 1 to 64.
    data_width : int
        32 or 64.
    """

    def __init__(self, *, addr_width, data_width=32):
        check_int("addr_width", addr_width, 1, 64)
        check_choice("data_width", data_width, (32, 64))
        self.addr_width = addr_width
        self.data_width = data_width
        super().__init__({
            "awaddr": Out(addr_width), "awprot": Out(3), "awvalid": Out(1), "awready": In(1),
            "wdata": Out(data_width), "wstrb": Out(data_width // 8), "wvalid": Out(1),
            "wready": In(1),
            "bresp": In(2), "bvalid": In(1), "bready": Out(1),
            "araddr": Out(addr_width), "arprot": Out(3), "arvalid": Out(1), "arready": In(1),
            "rdata": In(data_width), "rresp": In(2), "rvalid": In(1), "rready": Out(1),
        })


class AXI4Signature(wiring.Signature):
    """AXI4 (full), manager's view, without the optional QoS/region/user signals.

    Parameters
    ----------
    addr_width : int
        Address bits, 1 to 64.
    data_width : int
        A power of two from 32 to 1024 (AXI4's widths from 32 bits up).
    id_width : int
        ID bits, 1 to 16.
    """

    def __init__(self, *, addr_width, data_width, id_width=1):
        check_int("addr_width", addr_width, 1, 64)
        check_choice("data_width", data_width, AXI4_DATA_WIDTHS)
        check_int("id_width", id_width, 1, 16)
        self.addr_width = addr_width
        self.data_width = data_width
        self.id_width = id_width
        members = {}
        for ch in ("aw", "ar"):
            members.update({
                f"{ch}id": Out(id_width), f"{ch}addr": Out(addr_width), f"{ch}len": Out(8),
                f"{ch}size": Out(3), f"{ch}burst": Out(2), f"{ch}lock": Out(1),
                f"{ch}cache": Out(4), f"{ch}prot": Out(3), f"{ch}valid": Out(1),
                f"{ch}ready": In(1),
            })
            if ch == "aw":
                members.update({
                    "wdata": Out(data_width), "wstrb": Out(data_width // 8), "wlast": Out(1),
                    "wvalid": Out(1), "wready": In(1),
                    "bid": In(id_width), "bresp": In(2), "bvalid": In(1), "bready": Out(1),
                })
        members.update({
            "rid": In(id_width), "rdata": In(data_width), "rresp": In(2), "rlast": In(1),
            "rvalid": In(1), "rready": Out(1),
        })
        super().__init__(members)
