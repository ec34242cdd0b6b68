"""A Modbus server with known, predictable data for the Modbus device tests.

Usage:
    python modbus_server.py tcp PORT          Modbus TCP on 127.0.0.1:PORT
    python modbus_server.py rtu TTY [BAUD]    Modbus RTU on a serial port (e.g. a pty)

Needs pymodbus 3.16 or later 3.x (`pip install 'pymodbus[serial]>=3.16,<4'`). Device id 1.
Addresses below are protocol addresses, as sent on the wire (0-based):

    holding 0          counter: +1 every 50 ms since the server started (wraps at 65536);
                       read-only, so writing it answers "illegal data address"
    holding 1..299     holding[i] = 3 * i, writable
    input 0..99        input[i] = 1000 + i
    coil 0..2099       on when i % 3 == 0, writable
    discrete 0..31     on when i % 2 == 1

Anything else answers "illegal data address". The counter is computed from the clock
when it is read, so its value is exact at any moment rather than depending on when a
background task last ran. The server exits by itself when the process that started it goes
away, so a killed test run leaves nothing behind.
"""

import asyncio
import os
import sys
import time

from pymodbus.server import ModbusSerialServer, ModbusTcpServer
from pymodbus.simulator import DataType, SimData, SimDevice

COUNTER_PERIOD_S = 0.05
HOLDING = 300
INPUT = 100
COILS = 2100
DISCRETE = 32
HOLDING_FUNCTIONS = {3, 6, 16, 22, 23}

START = time.monotonic()


def counter():
    return int((time.monotonic() - START) / COUNTER_PERIOD_S) & 0xFFFF


async def refresh_counter(function_code, start_address, _address, _count, registers, _values):
    # Called before every access with the block's live registers; the holding block
    # starts at address 0, so the counter sits at index 0 - start_address.
    if function_code in HOLDING_FUNCTIONS:
        registers[0 - start_address] = counter()
    return None


def device():
    return SimDevice(
        id=1,
        simdata=(
            [SimData(0, values=[i % 3 == 0 for i in range(COILS)], datatype=DataType.BITS)],
            [SimData(0, values=[i % 2 == 1 for i in range(DISCRETE)], datatype=DataType.BITS)],
            [
                SimData(0, values=0, datatype=DataType.REGISTERS, readonly=True),
                SimData(1, values=[3 * i for i in range(1, HOLDING)], datatype=DataType.REGISTERS),
            ],
            [SimData(0, values=[1000 + i for i in range(INPUT)], datatype=DataType.REGISTERS)],
        ),
        action=refresh_counter,
    )


async def exit_with_parent():
    parent = os.getppid()
    while os.getppid() == parent:
        await asyncio.sleep(0.5)
    os._exit(0)


async def main(argv):
    if len(argv) < 3 or argv[1] not in ("tcp", "rtu"):
        sys.exit(__doc__)
    if argv[1] == "tcp":
        server = ModbusTcpServer(device(), address=("127.0.0.1", int(argv[2])))
    else:
        baud = int(argv[3]) if len(argv) > 3 else 19200
        server = ModbusSerialServer(device(), port=argv[2], baudrate=baud)
    asyncio.get_running_loop().create_task(exit_with_parent())
    await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(sys.argv))
