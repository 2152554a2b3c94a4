"""What the build needs to know about a board: platform, oscillator, PLL, tool options, and the
named configurations of the payload that fit it. The boards themselves: ``fpga/ulx3s.py``,
``fpga/icebreaker.py``."""

from dataclasses import dataclass, field

from rtl.bus.uart import uart_divisor

from .top import BoardTop

__all__ = ["Config", "Board"]


@dataclass(frozen=True)
class Config:
    """A payload configuration: ``make()`` returns the payload component; ``pes`` the number
    of multiply-accumulate units working in parallel (for the peak MAC/s figure); ``bench``
    False leaves it out of the benchmark's default list (a configuration known not to fit, or
    one not measured because its synthesis takes hours); ``route`` False: the benchmark reports
    its synthesis alone (yosys' cells against the device, ``fpga.build.synth_report``), for a
    configuration that does not fit or whose place and route outlasts a benchmark run."""
    name: str
    make: object
    freq: float
    pes: int = 0
    description: str = ""
    params: dict = field(default_factory=dict)
    bench: bool = True
    route: bool = True


@dataclass(frozen=True)
class Board:
    name: str
    platform: object            # the amaranth-boards platform class
    family: str                 # "ecp5" or "ice40"
    fin: float                  # oscillator frequency (Hz)
    configs: dict               # name -> Config
    default_config: str
    make_clockgen: object       # (freq) -> callable(platform) -> Elaboratable
    synth_opts: str = ""
    nextpnr_opts: str = "--timing-allow-fail"
    ram_bytes: int = 16384
    #: nextpnr options per placer (``fpga.build.PLACERS``; a placer not listed runs with
    #: ``--placer <name>`` alone) and the placer a build uses unless told otherwise
    placer_opts: dict = field(default_factory=dict)
    default_placer: str = "heap"
    #: the device's logic cells (``COMB``: LUT4 sites), DSP blocks, block RAMs and SPRAMs, for
    #: the fit of a synthesis that is not placed (``fpga.build.synth_report``)
    capacity: dict = field(default_factory=dict)

    def placer_options(self, placer):
        """nextpnr's options for ``placer`` on this board ("" for nextpnr's default, HeAP)."""
        if placer in self.placer_opts:
            return self.placer_opts[placer]
        return "" if placer == "heap" else f"--placer {placer}"

    def config(self, name):
        if name not in self.configs:
            raise ValueError(f"unknown config {name!r} for {self.name} "
                             f"(choose from {', '.join(self.configs)})")
        return self.configs[name]

    def top(self, config, *, freq=None, baud=115200):
        """The Elaboratable to build for ``config`` (a name or a Config)."""
        cfg = self.config(config) if isinstance(config, str) else config
        freq = cfg.freq if freq is None else freq
        clockgen = self.make_clockgen(freq)
        uart_divisor(clockgen.freq, baud)         # fail before building the payload
        return BoardTop(cfg.make(), clockgen=clockgen, freq=clockgen.freq, baud=baud,
                        ram_bytes=self.ram_bytes)
