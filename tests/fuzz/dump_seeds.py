# gdb script: writes every text the unit tests hand scenario::load_text to a seed file, as
# tests/fuzz/seeds/unit-*.toml were made (texts over 64 KiB are skipped; names are content
# hashes, so a rerun adds only new texts). Usage, from the repository root:
#   mkdir -p /tmp/seeds && SEEDS_OUT=/tmp/seeds gdb -q -batch -ex 'source tests/fuzz/dump_seeds.py' \
#     -ex run --args build/unit_tests --gtest_filter='Scenario*:Plan*:LabVmScenarios*:Fault*'
# then copy the new files into tests/fuzz/seeds/.
import hashlib
import os

import gdb

OUT = os.environ.get("SEEDS_OUT", "/tmp/seeds")


class LoadText(gdb.Breakpoint):
    def stop(self):
        text = gdb.parse_and_eval("text")
        ptr, n = int(text["_M_dataplus"]["_M_p"]), int(text["_M_string_length"])
        if 0 < n <= 65536:
            data = gdb.selected_inferior().read_memory(ptr, n).tobytes()
            name = f"unit-{hashlib.sha1(data).hexdigest()[:12]}.toml"
            with open(os.path.join(OUT, name), "wb") as f:
                f.write(data)
        return False  # never stop


gdb.execute("set pagination off")
LoadText("tb::scenario::load_text")
