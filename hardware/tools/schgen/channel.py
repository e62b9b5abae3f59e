"""The channel sheet: one drive channel, used four times (CH0..CH3).

Enable input and its reset default, the 12 V and 5 V P-FET cells (schgen.cell), the 3.3 V load
switch option, rail sense and indicator, and the drive connector.
"""

from __future__ import annotations

from schgen.cell import CELLS, cell
from schgen.model import FP_2920, FP_C, FP_R, FP_SMA, FP_SOT23, Sheet

Y_3V3 = 213.36  # the 3.3 V option's row


def channel_sheet() -> Sheet:
    s = Sheet("channel", "Power board: one drive channel (used 4x: CH0..CH3)")
    s.hier = {"EN": "input", "SENSE": "output"}
    enable_input(s)
    for c in CELLS:
        cell(s, c)
    load_switch_3v3(s)
    support_3v3(s)
    rail_sense(s)
    indicator_and_connector(s)
    notes(s)
    return s


def enable_input(s: Sheet) -> None:
    """The enable input, and its default state while the MCU is in reset."""
    s.add(
        "R1",
        "Device:R",
        "100",
        30.48,
        50.8,
        {"1": "EN", "2": "ENF"},
        angle=90,
        footprint=FP_R,
        mpn="RC0805FR-07100RL",
        manufacturer="Yageo",
        price_eur="0.01",
    )
    s.add(
        "R2",
        "Device:R",
        "10k",
        22.86,
        35.56,
        {"1": "PULL", "2": "EN"},
        footprint=FP_R,
        mpn="RC0805FR-0710KL",
        manufacturer="Yageo",
        price_eur="0.01",
    )
    s.add(
        "JP1",
        "Jumper:SolderJumper_3_Bridged12",
        "DEFAULT ON|OFF",
        22.86,
        22.86,
        {"A": "VCC", "C": "PULL", "B": "GND"},
        footprint="Jumper:SolderJumper-3_P1.3mm_Bridged12_RoundedPad1.0x1.5mm",
        note="1-2 bridged: channel ON while MCU in reset (default); cut and bridge 2-3 for OFF",
    )


def load_switch_3v3(s: Sheet) -> None:
    """3.3 V (M.2 only): load switch with slew control, populated on channels that need it."""
    y0 = Y_3V3
    s.add(
        "U1",
        "powerfault:TPS22965N",
        "TPS22965N",
        104.14,
        y0,
        {"VIN": "V3F", "VBIAS": "+5V", "ON": "ENF", "CT": "CT3", "VOUT": "OUT3V3", "GND": "GND"},
        footprint="Package_SON:WSON-8-1EP_2x2mm_P0.5mm_EP0.9x1.6mm",
        mpn="TPS22965NDSGR",
        manufacturer="Texas Instruments",
        price_eur="0.90",
        dnp=True,
        note="3.3 V option (M.2 direct); no quick-output-discharge variant",
    )
    s.add(
        "F3",
        "Device:Polyfuse",
        "4A/15V",
        83.82,
        y0 - 10.16,
        {"1": "+3V3", "2": "V3F"},
        footprint=FP_2920,
        mpn="2920L400/15MR",
        manufacturer="Littelfuse",
        price_eur="0.50",
        dnp=True,
    )
    # V3F is fed through the polyfuse (a passive pin) and feeds the load switch's VIN power pins
    s.add("#FLG1", "power:PWR_FLAG", "PWR_FLAG", 63.5, y0 - 2.54, {"1": "V3F"})


def support_3v3(s: Sheet) -> None:
    """The 3.3 V option's timing and decoupling capacitors and its freewheel diode."""
    y0 = Y_3V3
    s.add(
        "C3",
        "Device:C",
        "1n",
        96.52,
        y0 + 17.78,
        {"1": "CT3", "2": "GND"},
        footprint=FP_C,
        mpn="GRM2165C1H102JA01D",
        manufacturer="Murata",
        price_eur="0.03",
        dnp=True,
        note="rise time about 1.3 ms at 3.3 V",
    )
    s.add(
        "C4",
        "Device:C",
        "100n",
        124.46,
        y0 + 17.78,
        {"1": "+5V", "2": "GND"},
        footprint=FP_C,
        mpn="GRM21BR71H104KA01L",
        manufacturer="Murata",
        price_eur="0.02",
        dnp=True,
    )
    s.add(
        "C5",
        "Device:C",
        "1u",
        76.2,
        y0 + 7.62,
        {"1": "V3F", "2": "GND"},
        footprint=FP_C,
        mpn="GRM21BR71E105KA99L",
        manufacturer="Murata",
        price_eur="0.05",
        dnp=True,
    )
    s.add(
        "D5",
        "Device:D_Schottky",
        "B340A",
        147.32,
        y0 + 12.7,
        {"K": "OUT3V3", "A": "GND"},
        angle=270,
        footprint=FP_SMA,
        mpn="B340A-13-F",
        manufacturer="Diodes Inc",
        price_eur="0.12",
        dnp=True,
    )


def rail_sense(s: Sheet) -> None:
    """Jumper picks the rail, divider 1/3 (15 V full scale), clamp to the MCU rail."""
    s.add(
        "J2",
        "Connector_Generic:Conn_02x03_Odd_Even",
        "SENSE SEL",
        215.9,
        83.82,
        {"1": "OUT12", "3": "OUT5", "5": "OUT3V3", "2": "SEL", "4": "SEL", "6": "SEL"},
        footprint="Connector_PinHeader_2.54mm:PinHeader_2x03_P2.54mm_Vertical",
        mpn="61300621121",
        manufacturer="Wurth",
        price_eur="0.20",
        note="jumper 1-2: 12 V, 3-4: 5 V, 5-6: 3.3 V",
    )
    s.add(
        "R11",
        "Device:R",
        "20k",
        243.84,
        83.82,
        {"1": "SEL", "2": "SENSE"},
        angle=90,
        footprint=FP_R,
        mpn="RC0805FR-0720KL",
        manufacturer="Yageo",
        price_eur="0.01",
    )
    s.add(
        "R12",
        "Device:R",
        "10k",
        254.0,
        96.52,
        {"1": "SENSE", "2": "GND"},
        footprint=FP_R,
        mpn="RC0805FR-0710KL",
        manufacturer="Yageo",
        price_eur="0.01",
    )
    s.add(
        "C6",
        "Device:C",
        "1n",
        264.16,
        96.52,
        {"1": "SENSE", "2": "GND"},
        footprint=FP_C,
        mpn="GRM2165C1H102JA01D",
        manufacturer="Murata",
        price_eur="0.03",
        note="tau 6.7 us with the divider",
    )
    s.add(
        "D6",
        "Diode:BAT54S",
        "BAT54S",
        276.86,
        101.6,
        {"1": "GND", "2": "VCC", "3": "SENSE"},
        angle=270,
        footprint=FP_SOT23,
        mpn="BAT54S,215",
        manufacturer="Nexperia",
        price_eur="0.05",
        note="clamps SENSE to GND..VCC",
    )


def indicator_and_connector(s: Sheet) -> None:
    """LED lit while the switched 12 V output is up (the real rail, including its decay), and the
    drive connector."""
    s.add(
        "R13",
        "Device:R",
        "4k7",
        218.44,
        147.32,
        {"1": "OUT12", "2": "LEDA"},
        footprint=FP_R,
        mpn="RC0805FR-074K7L",
        manufacturer="Yageo",
        price_eur="0.01",
    )
    s.add(
        "D7",
        "Device:LED",
        "green",
        218.44,
        160.02,
        {"A": "LEDA", "K": "GND"},
        angle=90,
        footprint="LED_SMD:LED_0805_2012Metric",
        mpn="150080GS75000",
        manufacturer="Wurth",
        price_eur="0.10",
    )
    # drive connector
    s.add(
        "J1",
        "Connector:Screw_Terminal_01x05",
        "TO DRIVE",
        340.36,
        55.88,
        {"1": "OUT12", "2": "GND", "3": "OUT5", "4": "GND", "5": "OUT3V3"},
        footprint="TerminalBlock_Phoenix:TerminalBlock_Phoenix_MKDS-1,5-5-5.08_1x05_P5.08mm_Horizontal",
        mpn="1935190",
        manufacturer="Phoenix Contact",
        price_eur="1.60",
        note="1: +12V  2: GND  3: +5V  4: GND  5: +3V3 (M.2 only, never to SATA P1-P3)",
    )


def notes(s: Sheet) -> None:
    s.text(
        190.5,
        20.32,
        (
            "CHANNEL (x4).  EN high = rail ON.  EN low = OFF.\n"
            "EN floats while the MCU is in reset: R2 + JP1 set the state then "
            "(default ON = firmware default safe state).\n"
            "\n"
            "P-FET high-side cells (12 V and 5 V):\n"
            "- Q1 level shifter pulls node D low -> Q3 (PNP) pulls the gate down "
            "through R22k: soft-start,\n"
            "  Miller cap C1/C2 limits dV/dt to ~8 V/ms (12 V) / ~3 V/ms (5 V): "
            "inrush into 100 uF < 1 A.\n"
            "- EN low: R4k7 pulls D up, Q2 (NPN) slams the gate up through the "
            "BAT54: MOSFET off in < 5 us.\n"
            "- R100k keeps the gate at its source when everything is idle.\n"
            "- No capacitance on the switched side on purpose: the drive's own "
            "hold-up sets the fall.\n"
            "- B340A clamps the output when the cable inductance kicks at the cut.\n"
            "- Q5/R6, Q10/R10 (DNP): active discharge = PSU-collapse-style cut "
            "instead of cable-pull-style.\n"
            "3.3 V (M.2 only, DNP otherwise): TPS22965N load switch, CT 1 nF ~1.3 ms rise.\n"
            "SENSE: J2 jumper picks the rail; 20k/10k = 1/3 (15 V full scale at 5 V AVcc)."
        ),
        1.27,
    )
