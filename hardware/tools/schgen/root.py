"""The root sheet: the MCU, power input, fuses, TVS, bulk capacitance and 4 channel instances."""

from __future__ import annotations

from schgen.model import FP_SMA, Sheet


def root_sheet() -> Sheet:
    s = Sheet("powerboard", "SSD power-fault rig: 4-channel power switch board")
    mcu(s)
    power_input(s)
    input_protection(s)
    bulk_capacitance(s)
    flags_and_channels(s)
    pin_map(s)
    return s


def mcu(s: Sheet) -> None:
    """The Nano, its feed from the board's 5 V, and the no-auto-reset jumper."""
    s.add(
        "A1",
        "MCU_Module:Arduino_Nano_v3.x",
        "Arduino Nano (ATmega328P 16 MHz)",
        93.98,
        93.98,
        {
            "D4": "EN0",
            "D5": "EN1",
            "D6": "EN2",
            "D7": "EN3",
            "A0": "SNS0",
            "A1": "SNS1",
            "A2": "SNS2",
            "A3": "SNS3",
            "+5V": "VCC",
            "4": "GND",
            "29": "GND",
            "3": "NORST",
        },
        footprint="Module:Arduino_Nano",
        mpn="A000005",
        manufacturer="Arduino",
        price_eur="22.00",
        note="a clone (CH340) at ~5 EUR works the same",
        no_connect=True,
    )
    s.add(
        "D4",
        "Device:D_Schottky",
        "B340A",
        58.42,
        35.56,
        {"A": "+5V", "K": "VCC"},
        angle=180,
        footprint=FP_SMA,
        mpn="B340A-13-F",
        manufacturer="Diodes Inc",
        price_eur="0.12",
        note="board 5 V feeds the Nano; USB can never back-feed the drive rail",
    )
    s.add(
        "JP5",
        "Connector_Generic:Conn_01x02",
        "NO-AUTORESET",
        137.16,
        78.74,
        {"1": "NORST", "2": "NR"},
        angle=180,
        footprint="Connector_PinHeader_2.54mm:PinHeader_1x02_P2.54mm_Vertical",
        mpn="61300211121",
        manufacturer="Wurth",
        price_eur="0.10",
        note="fit jumper in service: opening the port does not reset the MCU; remove to flash",
    )
    s.add(
        "C10",
        "Device:C_Polarized",
        "10u",
        149.86,
        88.9,
        {"1": "NR", "2": "GND"},
        footprint="Capacitor_Tantalum_SMD:CP_EIA-3528-21_Kemet-B",
        mpn="T491B106K016AT",
        manufacturer="KEMET",
        price_eur="0.30",
    )


def power_input(s: Sheet) -> None:
    """The input terminals and their blade fuses."""
    s.add(
        "J3",
        "Connector:Screw_Terminal_01x04",
        "12V/5V IN",
        25.4,
        177.8,
        {"1": "+12V_IN", "2": "GND", "3": "GND", "4": "+5V_IN"},
        footprint="TerminalBlock_Phoenix:TerminalBlock_Phoenix_MKDS-1,5-4-5.08_1x04_P5.08mm_Horizontal",
        mpn="1935187",
        manufacturer="Phoenix Contact",
        price_eur="1.30",
        note="from an ATX PSU (yellow 12 V, red 5 V) or bench supplies",
    )
    s.add(
        "J4",
        "Connector:Screw_Terminal_01x02",
        "3V3 IN",
        25.4,
        218.44,
        {"1": "+3V3_IN", "2": "GND"},
        footprint="TerminalBlock_Phoenix:TerminalBlock_Phoenix_MKDS-1,5-2-5.08_1x02_P5.08mm_Horizontal",
        mpn="1935161",
        manufacturer="Phoenix Contact",
        price_eur="0.70",
        note="only for the M.2 3.3 V option (ATX orange)",
    )
    s.add(
        "F1",
        "Device:Fuse",
        "10A",
        50.8,
        165.1,
        {"1": "+12V_IN", "2": "+12V"},
        angle=90,
        footprint="Fuse:Fuseholder_Blade_ATO_Littelfuse_Pudenz_2_Pin",
        mpn="0287010.PXCN",
        manufacturer="Littelfuse",
        price_eur="0.30",
        note="ATO blade; holder Keystone 3557-2",
    )
    s.add(
        "F2",
        "Device:Fuse",
        "10A",
        50.8,
        190.5,
        {"1": "+5V_IN", "2": "+5V"},
        angle=90,
        footprint="Fuse:Fuseholder_Blade_ATO_Littelfuse_Pudenz_2_Pin",
        mpn="0287010.PXCN",
        manufacturer="Littelfuse",
        price_eur="0.30",
    )
    s.add(
        "F3",
        "Device:Fuse",
        "10A",
        50.8,
        226.06,
        {"1": "+3V3_IN", "2": "+3V3"},
        angle=90,
        footprint="Fuse:Fuseholder_Blade_ATO_Littelfuse_Pudenz_2_Pin",
        mpn="0287010.PXCN",
        manufacturer="Littelfuse",
        price_eur="0.30",
        dnp=True,
    )


def input_protection(s: Sheet) -> None:
    """A TVS on each input rail (it also crowbars a reversed supply into its fuse)."""
    s.add(
        "D1",
        "Device:D_TVS",
        "SMAJ15A",
        76.2,
        172.72,
        {"A2": "+12V", "A1": "GND"},
        angle=90,
        footprint=FP_SMA,
        mpn="SMAJ15A",
        manufacturer="Littelfuse",
        price_eur="0.20",
        note="unidirectional: A1=anode to GND",
    )
    s.add(
        "D2",
        "Device:D_TVS",
        "SMAJ6.0A",
        76.2,
        198.12,
        {"A2": "+5V", "A1": "GND"},
        angle=90,
        footprint=FP_SMA,
        mpn="SMAJ6.0A",
        manufacturer="Littelfuse",
        price_eur="0.20",
    )
    s.add(
        "D3",
        "Device:D_TVS",
        "SMAJ5.0A",
        76.2,
        233.68,
        {"A2": "+3V3", "A1": "GND"},
        angle=90,
        footprint=FP_SMA,
        mpn="SMAJ5.0A",
        manufacturer="Littelfuse",
        price_eur="0.20",
        dnp=True,
    )


def bulk_capacitance(s: Sheet) -> None:
    """470 uF + 10 uF per rail, so switching one channel does not disturb the others."""
    s.add(
        "C1",
        "Device:C_Polarized",
        "470u 25V",
        93.98,
        172.72,
        {"1": "+12V", "2": "GND"},
        footprint="Capacitor_THT:CP_Radial_D10.0mm_P5.00mm",
        mpn="EEU-FR1E471",
        manufacturer="Panasonic",
        price_eur="0.60",
    )
    s.add(
        "C2",
        "Device:C",
        "10u 25V",
        106.68,
        172.72,
        {"1": "+12V", "2": "GND"},
        footprint="Capacitor_SMD:C_1206_3216Metric",
        mpn="GRM31CR61E106KA12L",
        manufacturer="Murata",
        price_eur="0.15",
    )
    s.add(
        "C3",
        "Device:C_Polarized",
        "470u 16V",
        93.98,
        198.12,
        {"1": "+5V", "2": "GND"},
        footprint="Capacitor_THT:CP_Radial_D8.0mm_P3.50mm",
        mpn="EEU-FR1C471",
        manufacturer="Panasonic",
        price_eur="0.50",
    )
    s.add(
        "C4",
        "Device:C",
        "10u 25V",
        106.68,
        198.12,
        {"1": "+5V", "2": "GND"},
        footprint="Capacitor_SMD:C_1206_3216Metric",
        mpn="GRM31CR61E106KA12L",
        manufacturer="Murata",
        price_eur="0.15",
    )
    s.add(
        "C5",
        "Device:C_Polarized",
        "470u 10V",
        93.98,
        233.68,
        {"1": "+3V3", "2": "GND"},
        footprint="Capacitor_THT:CP_Radial_D8.0mm_P3.50mm",
        mpn="EEU-FR1A471",
        manufacturer="Panasonic",
        price_eur="0.45",
        dnp=True,
    )
    s.add(
        "C6",
        "Device:C",
        "10u 25V",
        106.68,
        233.68,
        {"1": "+3V3", "2": "GND"},
        footprint="Capacitor_SMD:C_1206_3216Metric",
        mpn="GRM31CR61E106KA12L",
        manufacturer="Murata",
        price_eur="0.15",
        dnp=True,
    )


def flags_and_channels(s: Sheet) -> None:
    # rails enter through connectors and fuses (passive pins): PWR_FLAGs tell ERC they are driven
    for i, net in enumerate(("+12V", "+5V", "+3V3", "GND")):
        s.add(f"#FLG0{i + 1}", "power:PWR_FLAG", "PWR_FLAG", 127.0 + 12.7 * i, 160.02, {"1": net})
    s.sheets = [
        (f"CH{i}", 241.3, 50.8 + 30.48 * i, {"EN": f"EN{i}", "SENSE": f"SNS{i}"}) for i in range(4)
    ]


def pin_map(s: Sheet) -> None:
    s.text(
        200.66,
        175.26,
        (
            "PIN MAP (firmware must match, see hardware/README.md)\n"
            "  CH0: EN = D4 (PD4)   SENSE = A0 (ADC0)\n"
            "  CH1: EN = D5 (PD5)   SENSE = A1 (ADC1)\n"
            "  CH2: EN = D6 (PD6)   SENSE = A2 (ADC2)\n"
            "  CH3: EN = D7 (PD7)   SENSE = A3 (ADC3)\n"
            "  EN HIGH = channel powered, LOW = cut.\n"
            "  UART: Nano USB serial (D0/D1), 115200 8N1.\n"
            "  ADC reference: AVcc = VCC (about 4.7 V behind D4), divider 1/3:\n"
            "    counts = Vrail / 3 / VCC * 1024  (12 V ~ 871, 5 V ~ 363, 3.3 V ~ 240)\n"
            "\n"
            "Hardware default while the MCU is in reset / unprogrammed:\n"
            "  channel ON (JP1 of each channel, 1-2 bridged). Cut JP1 and bridge 2-3 for OFF.\n"
            "TVS on each input rail also crowbars a reversed supply into its fuse."
        ),
        1.27,
    )
