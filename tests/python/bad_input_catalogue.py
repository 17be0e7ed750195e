"""sojourn's catalogue of bad inputs: every case is a mistake a user can make (experiment
files, --set overrides, command lines, sweep files, trace files, Python API calls) with a
fragment of the one-line message it must print. test_bad_inputs.py runs all of them (in
batches, each batch in a subprocess with a memory and CPU cap, each case with a time
limit) and fails on a traceback, a crash, a hang, an exit code other than 2, a missing
fragment, or anything left in the output location.

Kinds (``Case.kind``):
  set    ``sojourn run BASE --out OUT --set KEY=VALUE`` (``arg`` is ``KEY=VALUE``)
  toml   ``sojourn run FILE --out OUT`` with ``FILE`` holding ``arg`` (TOML text; ``{trace}``
         is replaced by the path of a trace file holding ``Case.trace``, ``{fifo}`` by the
         path of a named pipe)
  cli    ``sojourn ARGV`` with ``{base}``, ``{out}``, ``{tmp}``, ``{file}`` substituted
  sweep  ``sojourn sweep FILE --out OUT`` with ``FILE`` holding ``arg`` (``{base}`` = path)
  api    Python evaluated with ``sojourn``, ``BASE`` (dict), ``BASE_FILE``, ``OUT``, ``TMP``
         in scope; it must raise ``sojourn.ConfigError`` whose text has the fragment
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Case:
    id: str
    kind: str
    arg: object
    expect: str
    trace: Optional[bytes] = None
    # Also run through the real `sojourn` command in its own capped subprocess.
    cli: bool = False


BASE_TOML = """\
name = "catalogue-base"
duration = "2s"
seed = 1

[topology]
kind = "dumbbell"
pairs = 2
bottleneck = { rate = "10Mbit", delay = "5ms", qdisc = { kind = "pfifo", limit = 100 } }
access = { rate = "1Gbit", delay = "1ms" }

[[workload]]
kind = "cbr"
pair = 0
rate = "5Mbit"

[[workload]]
kind = "bulk"
pair = 1

[record]
interval = "100ms"
"""

BASE_DICT = {
    "name": "catalogue-base",
    "duration": "2s",
    "topology": {"kind": "dumbbell", "pairs": 2,
                 "bottleneck": {"rate": "10Mbit", "delay": "5ms", "qdisc": {"kind": "pfifo", "limit": 100}},
                 "access": {"rate": "1Gbit", "delay": "1ms"}},
    "workload": [{"kind": "cbr", "pair": 0, "rate": "5Mbit"}, {"kind": "bulk", "pair": 1}],
}

Q = "topology.bottleneck.qdisc"
B = "topology.bottleneck"
W0 = "workload[0]"
W1 = "workload[1]"

CASES: list = []


def add(id: str, kind: str, arg: object, expect: str, trace: Optional[bytes] = None, cli: bool = False) -> None:
    CASES.append(Case(id, kind, arg, expect, trace, cli))


def s(id: str, kv: str, expect: str, cli: bool = False) -> None:
    add(id, "set", kv, expect, cli=cli)


# --- the failures issue #17 lists -------------------------------------------------------
add("deep-nesting-5000", "toml", 'duration = "1s"\nx = ' + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply", cli=True)
add("deep-nesting-tables", "toml", 'duration = "1s"\n' + "x = " + "{a = " * 300 + "1" + "}" * 300 + "\n", "nested more than 64 levels")
s("set-index-not-numeric", "workload[x].rate=1Mbit", "list index 'x'", cli=True)
s("set-index-negative", "workload[-1].rate=1Mbit", "list index '-1'")
s("set-index-empty", "workload[].rate=1Mbit", "list index ''")
s("set-index-unclosed", "workload[0.rate=1Mbit", "malformed list index")
s("set-path-through-scalar", "duration.value=1s", "duration is a string")
s("set-path-through-number", "seed.x=1", "seed is a number")
s("set-path-through-list", "workload.rate=1Mbit", "workload is a list")
s("set-index-into-table", "topology[0].kind=1", "not a list")
s("set-huge-index", "workload[100000000].rate=1Mbit", "is too large", cli=True)
s("set-index-past-end", "workload[7].rate=1Mbit", "workload[2]")
s("set-empty-key", "=5", "expected a dotted key")
s("set-double-dot", "topology..kind=dumbbell", "empty key name")
add("set-no-equals", "cli", ["run", "{base}", "--out", "{out}", "--set", "duration"], "expected KEY=VALUE")
add("seed-negative", "cli", ["run", "{base}", "--out", "{out}", "--seed", "-1"], "--seed: -1 is out of range", cli=True)
add("seed-too-large", "cli", ["run", "{base}", "--out", "{out}", "--seed", "18446744073709551616"], "out of range")
add("seed-not-integer", "cli", ["run", "{base}", "--out", "{out}", "--seed", "abc"], "invalid int value")
add("out-existing-file", "cli", ["run", "{base}", "--out", "{file}"], "exists and is a file", cli=True)
add("out-below-file", "cli", ["run", "{base}", "--out", "{file}/sub"], "is a file, so no directory")
add("out-uncreatable-proc", "cli", ["run", "{base}", "--out", "/proc/sojourn-no/x"], "cannot create directory", cli=True)
add("out-empty", "cli", ["run", "{base}", "--out", ""], "expected a directory path")
s("rate-mbps-is-bytes-too-fast-a-sender", f"{W0}.rate=\"2Gbps\"", "")  # placeholder replaced below
CASES.pop()
s("nan-float", f"{Q}={{kind=\"pie\", alpha=nan}}", "finite", cli=True)
s("inf-float", f"{Q}={{kind=\"pie\", beta=inf}}", "finite")
s("neg-inf-float", f"{Q}={{kind=\"red\", limit=\"400KB\", probability=-inf}}", "finite number")
s("nan-loss", f"{B}.loss=nan", "finite number")
s("nan-limit-int", f"{Q}={{kind=\"pfifo\", limit=nan}}", "finite")
s("inf-duration", "duration=inf", "non-finite number")

# --- did you mean (from the keys a table accepts) ---------------------------------------
for typo, right, q in [("tagret", "target", "codel"), ("quantumm", "quantum", "fq_codel"), ("tupdat", "tupdate", "pie"),
                       ("bandwith", "bandwidth", "cake"), ("perturbe", "perturb", "sfq"), ("intervall", "interval", "codel"),
                       ("limt", "limit", "pfifo"), ("ecn_", "ecn", "fq_codel"), ("flow", "flows", "fq_codel"),
                       ("flow_limt", "flow_limit", "fq"), ("quantun", "quantum", "fq")]:
    s(f"hint-{q}-{typo}", f"{Q}={{kind=\"{q}\", {typo}=1}}", f'did you mean "{right}"')
s("hint-link-dealy", f"{B}.dealy=\"5ms\"", 'did you mean "delay"', cli=True)
s("hint-link-bandwith", f"{B}.bandwith=\"5Mbit\"", 'did you mean "rate"')
s("hint-link-latency", f"{B}.latency=\"5ms\"", 'did you mean "delay"')
s("hint-link-los", f"{B}.los=0.1", 'did you mean "loss"')
s("hint-link-rat", f"{B}.rat=\"5Mbit\"", 'did you mean "rate"')
s("hint-record-packet", "record.packet=true", 'did you mean "packets"')
s("hint-record-intervall", "record.intervall=\"1s\"", 'did you mean "interval"')
s("hint-top-duraton", "duraton=\"5s\"", 'did you mean "duration"')
s("hint-top-warmpu", "warmpu=\"1s\"", 'did you mean "warmup"')
s("hint-topology-pair", "topology.pair=3", 'did you mean "pairs"')
s("hint-workload-rat", f"{W0}.rat=\"1Mbit\"", 'did you mean "rate"')
s("hint-transport-cca", "transport.cca=\"bbr\"", 'did you mean "cc"')
s("hint-qdisc-kind", f"{Q}=\"fq_codl\"", 'did you mean "fq_codel"')
s("hint-workload-kind", f"{W0}.kind=\"cbrr\"", "unknown")

# --- units -------------------------------------------------------------------------------
s("rate-no-unit", f"{B}.rate=\"10\"", "needs a unit")
s("rate-bare-int", f"{B}.rate=10", "expected a rate string")
s("rate-unknown-unit", f"{B}.rate=\"10Mbits\"", "unknown rate unit")
s("rate-mb-per-s", f"{B}.rate=\"10MB/s\"", "unknown rate unit")
s("rate-mb-size-unit", f"{B}.rate=\"10MB\"", "unknown rate unit")
s("rate-negative", f"{B}.rate=\"-10Mbit\"", "expected a rate")
s("rate-zero", f"{B}.rate=\"0Mbit\"", "must be positive")
s("rate-huge", f"{B}.rate=\"1e30Mbit\"", "unknown rate unit")
s("rate-overflow", f"{B}.rate=\"99999999999999999999Tbit\"", "out of range")
s("rate-words", f"{B}.rate=\"fast\"", "expected a rate")
s("rate-bool", f"{B}.rate=true", "expected a rate string")
s("delay-no-unit", f"{B}.delay=\"5\"", "needs a unit")
s("delay-unknown-unit", f"{B}.delay=\"5 parsecs\"", "unknown duration unit")
s("delay-negative", f"{B}.delay=\"-5ms\"", "expected a duration")
s("delay-number", f"{B}.delay=5", "expected a duration string")
s("duration-zero", "duration=\"0s\"", "must be positive")
s("duration-overflow", "duration=\"1e40h\"", "unknown duration unit")
s("duration-out-of-range", "duration=\"99999999999999h\"", "out of range")
s("duration-table", "duration={a=1}", "expected a duration string")
s("warmup-longer", "warmup=\"10s\"", "must be shorter than the duration")
s("size-unknown-unit", f"{W0}.packet_size=\"1500 octets\"", "unknown size unit")
s("size-negative-int", f"{W0}.packet_size=-5", "cannot be negative")
s("size-bool", f"{W0}.packet_size=true", "expected a size")

# --- top level and types -------------------------------------------------------------------
s("unknown-top-key", "colour=\"blue\"", "unknown key")
s("seed-in-file-negative", "seed=-1", "out of range")
s("seed-in-file-string", "seed=\"one\"", "expected an integer")
s("repeats-zero", "repeats=0", "out of range")
s("repeats-huge", "repeats=1000000000", "out of range")
s("name-number", "name=5", "expected a string")
s("topology-string", "topology=\"dumbbell\"", "expected a table")
s("topology-kind-unknown", "topology.kind=\"ring\"", "unknown value")
s("workload-table", "workload={kind=\"cbr\"}", "use [[workload]]")
s("workload-empty", "workload=[]", "at least one workload")
s("workload-entry-string", "workload=[\"cbr\"]", "expected a table")
s("transport-string", "transport=\"tcp\"", "expected a table")
s("transport-reader-p99-below-median", "transport.reader_wakeup={dist=\"lognormal\", median=\"1ms\", p99=\"100us\"}", "transport.reader_wakeup.p99: must not be below `median`")
s("transport-reader-median-zero", "transport.reader_wakeup={dist=\"lognormal\", median=\"0s\", p99=\"1ms\"}", "transport.reader_wakeup.median: must be positive")
s("transport-reader-pause-string", "transport.reader_pause=\"2ms\"", "transport.reader_pause: expected a table")
s("transport-reader-pause-no-length", "transport.reader_pause={every=\"2s\"}", "transport.reader_pause.length: required")
s("transport-reader-pause-zero-every", "transport.reader_pause={every=\"0s\", length=\"1ms\"}", "transport.reader_pause.every: the mean interval must be positive")
s("record-string", "record=\"all\"", "expected a table")

# --- topology ------------------------------------------------------------------------------
s("pairs-zero", "topology.pairs=0", "out of range")
s("pairs-negative", "topology.pairs=-3", "out of range")
s("pairs-float", "topology.pairs=1.5", "expected an integer")
s("pairs-string", "topology.pairs=\"two\"", "expected an integer")
s("pair-delays-short", "topology.pair_delays=[\"1ms\"]", "pair_delays")
s("bottleneck-not-table", f"{B}=\"10Mbit\"", "expected a table")
s("access-rate-zero", "topology.access.rate=\"0bit\"", "must be positive")
s("loss-above-one", f"{B}.loss=1.5", "out of range")
s("loss-negative", f"{B}.loss=-0.1", "out of range")
s("reorder-above-one", f"{B}.reorder=2", "out of range")
s("tx-ring-huge", f"{B}.tx_ring=100000000", "out of range")
s("shaper-string", f"{B}.shaper=\"yes\"", "expected true or false")
s("rate-schedule-no-list", f"{B}.rate_schedule=5", "expected a list")
s("rate-schedule-no-at", f"{B}.rate_schedule=[{{rate=\"5Mbit\"}}]", "required")
s("rate-schedule-decreasing", f"{B}.rate_schedule=[{{at=\"2s\", rate=\"5Mbit\"}}, {{at=\"1s\", rate=\"6Mbit\"}}]", "must increase")
s("rate-schedule-zero", f"{B}.rate_schedule=[{{at=\"1s\", rate=\"0bit\"}}]", "must be positive")
s("delay-schedule-bad", f"{B}.delay_schedule=[{{at=\"1s\", delay=\"x\"}}]", "expected a duration")
s("trace-and-rate", f"{B}.trace=\"t.txt\"", "not both")
s("trace-bytes-without-trace", f"{B}.trace_bytes_per_opportunity=1500", "only meaningful with `trace`")
s("framing-bad", f"{B}.framing_overhead=\"x\"", "expected a size")
add("graph-unknown-node", "toml", 'duration = "1s"\n[topology]\nkind = "graph"\nnodes = ["a", "b"]\n[[topology.links]]\nfrom = "a"\nto = "c"\nrate = "1Mbit"\n[[workload]]\nkind = "cbr"\nfrom = "a"\nto = "b"\nrate = "1Mbit"\n', "c")
add("graph-duplicate-node", "toml", 'duration = "1s"\n[topology]\nkind = "graph"\nnodes = ["a", "a"]\n[[workload]]\nkind = "cbr"\nfrom = "a"\nto = "a"\nrate = "1Mbit"\n', "duplicate node")
add("graph-no-route", "toml", 'duration = "1s"\n[topology]\nkind = "graph"\nnodes = ["a", "b", "c"]\n[[topology.links]]\nfrom = "a"\nto = "b"\nrate = "1Mbit"\nduplex = false\n[[workload]]\nkind = "cbr"\nfrom = "b"\nto = "a"\nrate = "1Mbit"\n', "route")
add("no-topology", "toml", 'duration = "1s"\n[[workload]]\nkind = "cbr"\nrate = "1Mbit"\n', "[topology]")
add("no-duration", "toml", '[topology]\nkind = "dumbbell"\nbottleneck = { rate = "1Mbit" }\n[[workload]]\nkind = "cbr"\nrate = "1Mbit"\n', "duration: required")
add("no-workload", "toml", 'duration = "1s"\n[topology]\nkind = "dumbbell"\nbottleneck = { rate = "1Mbit" }\n', "at least one [[workload]]")
add("no-bottleneck-rate", "toml", 'duration = "1s"\n[topology]\nkind = "dumbbell"\n[[workload]]\nkind = "cbr"\nrate = "1Mbit"\n', "rate")

# --- TOML files ----------------------------------------------------------------------------
add("toml-syntax", "toml", 'duration = "1s\n', "TOML syntax error")
add("toml-duplicate-key", "toml", 'duration = "1s"\nduration = "2s"\n', "TOML syntax error")
add("toml-not-utf8", "toml", b'duration = "\xff\xfe"\n', "not UTF-8")
add("toml-empty", "toml", "", "duration: required")
add("toml-binary", "toml", b"\x00\x01\x02\x03", "TOML syntax error")
add("exp-missing-file", "cli", ["run", "{tmp}/nope.toml", "--out", "{out}"], "no such file")
add("exp-directory", "cli", ["run", "{tmp}", "--out", "{out}"], "is a directory")
add("exp-dev-zero", "cli", ["validate", "/dev/zero"], "not a regular file", cli=True)
add("exp-dev-null", "cli", ["validate", "/dev/null"], "not a regular file")

# --- workloads -----------------------------------------------------------------------------
s("wl-pair-out-of-range", f"{W0}.pair=9", "pair")
s("wl-pair-negative", f"{W0}.pair=-1", "out of range")
s("wl-no-rate", f"{W0}={{kind=\"cbr\", pair=0}}", "rate")
s("wl-cbr-rate-zero", f"{W0}.rate=\"0bit\"", "")
s("wl-start-after-stop", f"{W0}={{kind=\"cbr\", pair=0, rate=\"1Mbit\", start=\"1s\", stop=\"0.5s\"}}", "")
s("wl-count-zero", f"{W1}.count=0", "out of range")
s("wl-count-huge", f"{W1}.count=10000000", "needs ~")
# 2,000 transfers per second for a million hours: each finished transfer keeps 32 B (its FCT
# and goodput for summary.json), ~230 TB; refused up front with the transfer count.
add("wl-transfers-million-hours", "cli", ["run", "{base}", "--out", "{out}", "--set", 'duration="1000000h"',
    "--set", 'workload[1]={kind="poisson", pair=1, interval="0.5ms", size="10kB"}'], "~7200000000000 transfers")
# Open loops offering more than their path's bottleneck carries pile up transfers without
# bound (docs/limits.md, "Overloaded open loops"): refused up front with the offered load,
# the link's rate and the override. The base's bottleneck is 10 Mbit/s.
s("wl-poisson-overload", f"{W1}={{kind=\"poisson\", pair=1, interval=\"0.5ms\", size=\"10kB\"}}",
  "arrivals outpace the link", cli=True)
s("wl-poisson-overload-names-link", f"{W1}={{kind=\"poisson\", pair=1, interval=\"10ms\", size=\"20kB\"}}",
  'through link "bottleneck" of 10.0 Mbit/s')
# 800/s × 1,448 B is 9.3 Mbit/s of payload, 11.0 with headers (1,720 B per transfer).
s("wl-poisson-overload-headers", f"{W1}={{kind=\"poisson\", pair=1, interval=\"1.25ms\", size=1448}}",
  "11.0 Mbit/s on the wire")
s("wl-small-files-overload", f"{W1}={{kind=\"small_files\", pair=1, interval=\"10ms\"}}", "allow_overload = true")
s("wl-poisson-overload-dist", f"{W1}={{kind=\"poisson\", pair=1, interval=\"1ms\", size={{dist=\"exponential\", mean=\"5kB\"}}}}",
  "40.0 Mbit/s of payload")
s("wl-allow-overload-not-bool", f"{W1}={{kind=\"poisson\", pair=1, interval=\"1s\", size=\"1kB\", allow_overload=\"yes\"}}",
  "expected true or false")
s("wl-allow-overload-typo", f"{W1}={{kind=\"poisson\", pair=1, interval=\"1s\", size=\"1kB\", allow_overlaod=true}}",
  'did you mean "allow_overload"')
s("wl-allow-overload-closed-loop", f"{W1}={{kind=\"actors\", pair=1, think=\"1s\", size=\"1kB\", allow_overload=true}}",
  "unknown key")
# Two loops of 500/s × 2 kB: 9.4 Mbit/s on the wire each, 18.7 together on 10 Mbit/s.
add("wl-two-open-loops-overload", "toml", BASE_TOML.split("[record]")[0] + """
[[workload]]
kind = "poisson"
pair = 0
interval = "2ms"
size = "2kB"

[[workload]]
kind = "poisson"
pair = 1
interval = "2ms"
size = "2kB"
""", "with the other open loops crossing it")
add("sweep-axis-overload", "sweep", 'base = "{base}"\n[[axis]]\nkey = "workload[1]"\nname = "load"\n'
    'values = [{kind = "poisson", pair = 1, interval = "100ms", size = "10kB"}, '
    '{kind = "poisson", pair = 1, interval = "1ms", size = "10kB"}]\nnames = ["light", "over"]\n',
    "arrivals outpace the link")
s("wl-from-unknown-node", f"{W0}={{kind=\"cbr\", from=\"x\", to=\"d0\", rate=\"1Mbit\"}}", "x")
s("wl-onoff-no-times", f"{W0}={{kind=\"onoff\", pair=0, rate=\"1Mbit\"}}", "on_time")
s("wl-distribution-bad", f"{W0}={{kind=\"onoff\", pair=0, rate=\"1Mbit\", on_time=\"1s\", off_time=\"1s\", distribution=\"pareto\"}}", "unknown value")
s("wl-transfer-no-size", f"{W1}={{kind=\"transfer\", pair=1}}", "size")
s("wl-transfer-size-dist-bad", f"{W1}={{kind=\"transfer\", pair=1, size=\"bounded-pareto alpha=x\"}}", "")
s("wl-actors-size-dist-unknown", f"{W1}={{kind=\"actors\", pair=1, count=2, think=\"1s\", size={{dist=\"zipf\"}}}}", "")
s("wl-actors-dist-min-gt-max", f"{W1}={{kind=\"actors\", pair=1, count=2, think=\"1s\", size={{dist=\"bounded_pareto\", alpha=1.2, min=\"1MiB\", max=\"1KiB\"}}}}", "")
s("wl-poisson-no-interval", f"{W1}={{kind=\"poisson\", pair=1, size=\"10KiB\"}}", "interval")
s("wl-thin-transport-bad", f"{W1}={{kind=\"thin\", pair=1, transport=\"sctp\", message_size=\"100B\", interval=\"10ms\"}}", "unknown value")
s("wl-dscp-huge", f"{W0}.dscp=1000", "out of range")
s("wl-ecn-string", f"{W0}.ecn=\"on\"", "expected true or false")
s("wl-pair-and-pairs", f"{W1}={{kind=\"bulk\", pair=1, pairs=\"all\"}}", "give either `pair` or `pairs`, not both")
s("wl-pairs-bad", f"{W0}={{kind=\"cbr\", pairs=\"some\", rate=\"1Mbit\"}}", "pairs")

# --- transport -----------------------------------------------------------------------------
s("cc-unknown", "transport.cc=\"tahoe\"", "unknown")
s("iw-zero", "transport.initial_window=0", "out of range")
s("mtu-tiny", "transport.mtu=10", "")
s("mss-huge", "transport.mss=100000", "")
s("ecn-mode-unknown", "transport.ecn=\"on\"", "\"accecn\" (Accurate ECN")
s("ecn-number", "transport.ecn=1", "got an integer")
s("prague-rtt-scaling-unknown", "transport.prague_rtt_scaling=\"scalable\"", "not modelled")
s("prague-rtt-target-zero", "transport.prague_rtt_target=\"0ms\"", "must be positive")
s("delack-negative", "transport.delack_min=\"-1ms\"", "expected a duration")
s("min-rto-number", "transport.min_rto=200", "expected a duration string")
s("dupthresh-zero", "transport.dupthresh=0", "out of range")
s("gso-max-size-zero", "transport.gso_max_size=0", "")
s("rwnd-string", "transport.rwnd=\"big\"", "expected a size")
s("transport-unknown", "transport.nagle=true", "unknown key")

# --- record --------------------------------------------------------------------------------
s("record-links-unknown", "record.links=[\"nope\"]", "no link named")
s("record-links-number", "record.links=5", "expected \"all\"")
s("record-packets-unknown", "record.packets=[\"nope\"]", "no link named")
s("record-sample-above-one", "record.packet_sample=2.0", "out of range")
s("record-sample-nan", "record.packet_sample=nan", "finite number")
s("record-fct-bad", "record.fct=\"last_byte\"", "unknown value")
s("record-interval-number", "record.interval=5", "expected a duration string")

# --- classifiers ---------------------------------------------------------------------------
s("classifier-table", "classifier={a=1}", "[[classifier]]")
s("classifier-entry-string", "classifier=[\"x\"]", "expected a table")

# --- disciplines: unknown keys, types, ranges ---------------------------------------------
QDISCS = ["pfifo", "bfifo", "pfifo_head_drop", "codel", "fq_codel", "fq", "cocoa", "cake", "pie", "fq_pie", "sfq", "red",
          "prio", "pfifo_fast", "tbf", "lstf_codel", "age", "las", "srpt", "htb", "drr"]
REQUIRED = {"red": ', limit="400KB"', "tbf": ', rate="5Mbit", burst="10KB", limit="30KB"', "age": ", thresholds=[100000]"}
for q in QDISCS:
    s(f"qdisc-{q}-unknown-key", f"{Q}={{kind=\"{q}\"{REQUIRED.get(q, '')}, zzzz_unknown=1}}", "unknown key")
s("qdisc-kind-number", f"{Q}={{kind=5}}", "expected a string")
s("qdisc-no-kind", f"{Q}={{limit=5}}", "needs `kind`")
s("qdisc-number", f"{Q}=5", "expected a qdisc name")
s("pfifo-limit-zero", f"{Q}={{kind=\"pfifo\", limit=0}}", "out of range")
s("pfifo-limit-string", f"{Q}={{kind=\"pfifo\", limit=\"many\"}}", "expected an integer")
s("bfifo-limit-bad", f"{Q}={{kind=\"bfifo\", limit=\"x\"}}", "expected a size")
s("codel-target-number", f"{Q}={{kind=\"codel\", target=5}}", "expected a duration string")
s("codel-ecn-string", f"{Q}={{kind=\"codel\", ecn=\"yes\"}}", "expected true or false")
s("fq-codel-flows-zero", f"{Q}={{kind=\"fq_codel\", flows=0}}", "out of range")
s("fq-codel-limit-negative", f"{Q}={{kind=\"fq_codel\", limit=-1}}", "out of range")
s("pie-alpha-string", f"{Q}={{kind=\"pie\", alpha=\"x\"}}", "expected an integer")
s("red-no-limit", f"{Q}={{kind=\"red\"}}", "needs `limit`")
s("red-probability-above-one", f"{Q}={{kind=\"red\", limit=\"400KB\", probability=2}}", "out of range")
s("tbf-no-rate", f"{Q}={{kind=\"tbf\"}}", "rate")
s("cake-bandwidth-bad", f"{Q}={{kind=\"cake\", bandwidth=\"fast\"}}", "expected a rate")
s("cake-flow-mode-bad", f"{Q}={{kind=\"cake\", flow_mode=\"sideways\"}}", "")
s("prio-bands-zero", f"{Q}={{kind=\"prio\", bands=0}}", "")
s("age-no-thresholds", f"{Q}={{kind=\"age\", thresholds=\"x\"}}", "")
s("sfq-divisor-bad", f"{Q}={{kind=\"sfq\", divisor=3}}", "")
# htb / drr trees (docs/disciplines/htb.md): one line naming the class and what is wrong
HC = '{classid="1:1", rate="100Mbit"}'
s("htb-rate-above-ceil", Q + '={kind="htb", classes=[{classid="1:10", rate="40Mbit", ceil="30Mbit"}]}',
  "40Mbit is above the class's ceil 30Mbit")
s("htb-child-above-parent-ceil",
  Q + '={kind="htb", classes=[' + HC + ', {classid="1:10", parent="1:1", rate="30Mbit", ceil="200Mbit"}]}',
  "exceeds its parent 1:1's ceil 100Mbit")
s("htb-leaf-on-inner-class", Q + '={kind="htb", classes=[{classid="1:1", rate="100Mbit", qdisc="pfifo"}, '
  '{classid="1:10", parent="1:1", rate="30Mbit"}]}', "a leaf qdisc on a class that has children")
s("htb-duplicate-classid", Q + '={kind="htb", classes=[' + HC + ', {classid="1:1", rate="1Mbit"}]}', "duplicate classid 1:1")
s("htb-unknown-parent", Q + '={kind="htb", classes=[{classid="1:10", parent="1:5", rate="1Mbit"}]}',
  "parent 1:5 is not a class of this htb")
s("htb-parent-cycle", Q + '={kind="htb", classes=[{classid="1:10", parent="1:20", rate="1Mbit"}, '
  '{classid="1:20", parent="1:10", rate="1Mbit"}]}', "its parents form a cycle")
s("htb-no-rate", Q + '={kind="htb", classes=[{classid="1:10"}]}', "required")
s("htb-default-number", Q + '={kind="htb", default=30}', "expected a string such as")
s("htb-filter-unknown-node", Q + '={kind="htb", classes=[' + HC + '], filters=[{dst="nosuch", classid="1:1"}]}',
  'no node named "nosuch"')
s("drr-quantum-zero", f"{Q}={{kind=\"drr\", classes=[{{classid=\"1:1\", quantum=0}}]}}", "cannot be zero")

# --- trace files ---------------------------------------------------------------------------
TRACE_EXP = BASE_TOML.replace('bottleneck = { rate = "10Mbit", delay = "5ms", qdisc = { kind = "pfifo", limit = 100 } }',
                              'bottleneck = { trace = "{trace}", delay = "5ms" }')
add("trace-missing", "toml", TRACE_EXP.replace("{trace}", "/nonexistent/trace.txt"), "cannot read trace")
add("trace-dev-zero", "toml", TRACE_EXP.replace("{trace}", "/dev/zero"), "not a regular file", cli=True)
add("trace-fifo", "toml", TRACE_EXP.replace("{trace}", "{fifo}"), "is not a regular file (a FIFO", cli=True)
add("trace-directory", "toml", TRACE_EXP.replace("{trace}", "/tmp"), "is a directory")
add("trace-words", "toml", TRACE_EXP, "expected a whole number of milliseconds", trace=b"1\n2\nthree\n")
add("trace-long-line-excerpt", "toml", TRACE_EXP, "characters)", trace=b"1\n" + b"x" * 100000 + b"\n")
add("trace-decreasing", "toml", TRACE_EXP, "must not decrease", trace=b"5\n3\n")
add("trace-empty", "toml", TRACE_EXP, "no delivery opportunities", trace=b"")
add("trace-comments-only", "toml", TRACE_EXP, "no delivery opportunities", trace=b"# nothing\n")
add("trace-all-zero", "toml", TRACE_EXP, "must be positive", trace=b"0\n0\n")
add("trace-negative", "toml", TRACE_EXP, "expected a whole number", trace=b"-1\n5\n")
add("trace-float", "toml", TRACE_EXP, "expected a whole number", trace=b"1.5\n")
add("trace-binary", "toml", TRACE_EXP, "not text", trace=b"\xff\xfe\x00\x01")
add("trace-huge-number", "toml", TRACE_EXP, "expected a whole number", trace=b"99999999999999999999999\n")

# --- sweep files ---------------------------------------------------------------------------
SW = 'base = "{base}"\n'
add("sweep-unknown-key", "sweep", SW + "repeat = 3\n", 'did you mean \'repeats\'', cli=True)
add("sweep-no-base", "sweep", "repeats = 2\n", "base: required")
add("sweep-base-missing", "sweep", 'base = "nope.toml"\n', "no such file")
add("sweep-base-number", "sweep", "base = 5\n", "expected a file name or a table")
add("sweep-axis-index-not-numeric", "sweep", SW + '[[axis]]\nkey = "workload[x].rate"\nvalues = ["1Mbit"]\n', "list index 'x'")
add("sweep-axis-huge-index", "sweep", SW + '[[axis]]\nkey = "workload[100000000].rate"\nvalues = ["1Mbit"]\n', "too large")
add("sweep-set-through-scalar", "sweep", SW + 'set = { "duration.x" = 1 }\n', "duration is a string")
add("sweep-axis-no-values", "sweep", SW + '[[axis]]\nkey = "duration"\nvalues = []\n', "non-empty list")
add("sweep-axis-no-key", "sweep", SW + '[[axis]]\nvalues = ["1s"]\n', "required")
add("sweep-axis-unknown-key", "sweep", SW + '[[axis]]\nkey = "duration"\nvalues = ["1s"]\nvalue = 1\n', "unknown key")
add("sweep-axis-bad-value", "sweep", SW + '[[axis]]\nkey = "topology.bottleneck.qdisc"\nvalues = ["pfifo", "nope"]\n', "unknown qdisc")
add("sweep-axis-dup-labels", "sweep", SW + '[[axis]]\nkey = "duration"\nvalues = ["1s", "1s"]\n', "get the label")
add("sweep-names-count", "sweep", SW + '[[axis]]\nkey = "duration"\nvalues = ["1s", "2s"]\nnames = ["a"]\n', "one per value")
add("sweep-names-slash", "sweep", SW + '[[axis]]\nkey = "duration"\nvalues = ["1s"]\nnames = ["a/b"]\n', "cannot be a directory name")
add("sweep-seeds-and-repeats", "sweep", SW + "seeds = [1, 2]\nrepeats = 2\n", "not both")
add("sweep-seeds-dup", "sweep", SW + "seeds = [1, 1]\n", "duplicate seeds")
add("sweep-seeds-negative", "sweep", SW + "seeds = [-1]\n", "integers in [0")
add("sweep-repeats-zero", "sweep", SW + "repeats = 0\n", "positive integer")
add("sweep-repeats-huge", "sweep", SW + "repeats = 100000000\n", "out of range")
add("sweep-too-many-runs", "sweep", SW + "repeats = 1000\n[[axis]]\nkey = \"seed\"\nname = \"s\"\nvalues = [" + ", ".join(str(i) for i in range(200)) + "]\n", "at most 100000")
add("sweep-variant-unknown-key", "sweep", SW + '[[variant]]\nname = "a"\nsets = {}\n', "did you mean 'set'")
add("sweep-variant-dup", "sweep", SW + '[[variant]]\nname = "a"\n[[variant]]\nname = "a"\n', "duplicate variant")
add("sweep-set-not-table", "sweep", SW + 'set = "duration=1s"\n', "expected a table of dotted keys")
add("sweep-end-margin-bad", "sweep", SW + 'end_margin = "soon"\n', "expected a duration")
add("sweep-point-invalid", "sweep", SW + 'set = { duration = "0s" }\n', "must be positive")
add("sweep-toml-syntax", "sweep", "base = \n", "TOML syntax error")
add("sweep-out-file", "cli", ["sweep", "{base}", "--out", "{file}"], "exists and is a file")
add("sweep-jobs-zero", "cli", ["sweep", "{sweepfile}", "--out", "{out}", "--jobs", "0"], "--jobs")
add("sweep-repeats-arg-zero", "cli", ["sweep", "{sweepfile}", "--out", "{out}", "--repeats", "0"], "--repeats")

# --- command lines -------------------------------------------------------------------------
add("cli-no-command", "cli", [], "")
add("cli-unknown-command", "cli", ["frobnicate"], "invalid choice")
add("cli-run-no-out", "cli", ["run", "{base}"], "--out")
add("cli-unknown-option", "cli", ["run", "{base}", "--out", "{out}", "--colour"], "unrecognized arguments")
add("cli-duration-bad", "cli", ["run", "{base}", "--out", "{out}", "--duration", "soon"], "expected a duration")
add("cli-duration-zero", "cli", ["run", "{base}", "--out", "{out}", "--duration", "0s"], "must be positive")
add("cli-validate-missing", "cli", ["validate", "{tmp}/none.toml"], "no such file")
add("cli-set-value-deep", "cli", ["validate", "{base}", "--set", "x=" + "[" * 3000 + "]" * 3000], "")
add("cli-compare-missing", "cli", ["compare", "{tmp}/nothing-here"], "")
add("cli-threshold-bad-dist", "cli", ["threshold", "zipf", "--load", "0.5"], "")
add("cli-threshold-bad-load", "cli", ["threshold", "bounded-pareto alpha=1.2 min=300KiB max=1GiB", "--load", "2"], "")

# --- limits --------------------------------------------------------------------------------
s("limit-pairs-huge", "topology.pairs=100001", "out of range", cli=True)  # 100,000 pairs set up in ~1.5 CPU s
s("limit-duration-overflow-u64", "duration=\"6000000000h\"", "out of range")
# A long run through `sojourn run`/sweeps streams its time series and packet log to disk
# (memory flat, docs/limits.md), so `duration = "1000000h"` is no longer refused for its
# memory there; the Python API without `out` returns them in memory and still refuses with
# the estimate (below).
#
# Runs larger than the machine (issue 40 §5): the memory estimate is held against what the
# process may really have (here the catalogue's 4 GiB address-space cap), the CPU-time
# estimate against a CPU-day. Each used to validate and then die: 100,000 pairs after ~18 s
# with a MemoryError traceback and "memory allocation of 1 bytes failed" (exit 134),
# 10,000,000 CBR flows with "memory allocation of 3657433088 bytes failed" (exit 134), a
# million hours ran with no word of the years it would take. A dumbbell of P pairs has
# 2P + 2 nodes and 4P + 2 links.
s("limit-pairs-100000-address-space", "topology.pairs=100000",
  "topology.pairs: 100000 pairs (200002 nodes, 400002 links): needs ~7.8 GB of memory", cli=True)
s("limit-cbr-count-ten-million", f"{W0}.count=10000000", "workload[0].count: 10000000 flows in this workload", cli=True)
s("limit-duration-million-hours-cpu", "duration=\"1000000h\"", "beyond the budget of a CPU-day (86400 s)", cli=True)
add("limit-validate-million-hours-cpu", "cli", ["validate", "{base}", "--set", 'duration="1000000h"'],
    "duration: 3.6e+09 s of simulated time", cli=True)
add("limit-sweep-point-pairs-100000", "sweep", SW + '[[axis]]\nkey = "topology.pairs"\nvalues = [2, 100000]\n',
    "topology.pairs: 100000 pairs (200002 nodes", cli=True)
add("limit-sweep-point-million-hours", "sweep", SW + '[[axis]]\nkey = "duration"\nvalues = ["2s", "1000000h"]\n',
    "duration: 3.6e+09 s of simulated time", cli=True)

# --- Python API ----------------------------------------------------------------------------
API = [
    ("api-seed-negative", "sojourn.run(BASE, seed=-1)", "out of range"),
    ("api-seed-huge", "sojourn.run(BASE, seed=2**64)", "out of range"),
    ("api-seed-float", "sojourn.run(BASE, seed=1.5)", "expected an integer"),
    ("api-seed-bool", "sojourn.run(BASE, seed=True)", "expected an integer"),
    ("api-set-index-not-numeric", "sojourn.validate(BASE, overrides={'workload[x].rate': '1Mbit'})", "list index 'x'"),
    ("api-set-through-scalar", "sojourn.validate(BASE, overrides={'duration.value': '1s'})", "duration is a string"),
    ("api-set-huge-index", "sojourn.validate(BASE, overrides={'workload[100000000].rate': '1Mbit'})", "too large"),
    ("api-overrides-not-dict", "sojourn.validate(BASE, overrides=[('a', 1)])", "expected a dict"),
    ("api-deep-dict", "sojourn.validate(deep_dict(5000))", "nested more than"),
    ("api-cyclic-dict", "sojourn.validate(cyclic_dict())", "nested more than"),
    ("api-source-int", "sojourn.validate(5)", "expected an experiment file path or a dict"),
    ("api-nan", "sojourn.validate(with_(BASE, 'topology.bottleneck.loss', float('nan')))", "finite number"),
    ("api-int-too-big", "sojourn.validate(with_(BASE, 'seed', 2**70))", "integer out of range"),
    ("api-object-value", "sojourn.validate(with_(BASE, 'name', object()))", "unsupported value"),
    ("api-non-string-key", "sojourn.validate({**BASE, 5: 1})", "keys must be strings"),
    ("api-duration-int", "sojourn.run(BASE, duration=5)", "expected a duration string"),
    ("api-write-to-file", "sojourn.Result.write(None, BASE_FILE)", "exists and is not a directory"),
    ("api-sweep-seeds-bad", "sojourn.sweep(SWEEP_FILE, OUT, seeds=[-1])", "integers in [0"),
    ("api-sweep-jobs-bad", "sojourn.sweep(SWEEP_FILE, OUT, jobs=-2)", "--jobs"),
    ("api-validate-missing", "sojourn.validate('/nonexistent.toml')", "no such file"),
    # in-memory results that cannot fit: refused with the estimate and the way out (`out=`)
    ("api-in-memory-million-hours", "sojourn.run(BASE, duration='1000000h')", "streams them to disk"),
    ("api-in-memory-100000h-estimate", "sojourn.run(BASE, duration='100000h')", "needs ~"),
    ("api-in-memory-packets-day-10g",
     "sojourn.run(with_(with_(BASE, 'topology.bottleneck.rate', '10Gbit'), 'record', {'packets': ['bottleneck']}), duration='24h')",
     "packet log held in memory"),
    ("api-in-memory-override-hint", "sojourn.run(BASE, duration='1000000h')", "SOJOURN_MEMORY"),
    ("api-out-is-file", "sojourn.run(BASE, out=BASE_FILE)", "exists and is a file"),
    ("api-poisson-overload",
     "sojourn.validate(with_(BASE, 'workload', [{'kind': 'poisson', 'pair': 0, 'interval': '1ms', 'size': '10kB'}]))",
     "allow_overload = true"),
]
for id_, code, frag in API:
    add(id_, "api", code, frag)

# --- Python disciplines (issue 39, docs/python-disciplines.md) ---------------------------
s("python-qdisc-no-module", f"{Q}={{kind=\"python\"}}", "needs `module` and `class`", cli=True)
s("python-qdisc-module-missing", f"{Q}={{kind=\"python\", module=\"no_such_aqm.py\", class=\"MyAqm\"}}",
  "no_such_aqm.py: no such file", cli=True)
s("python-qdisc-module-not-py", f"{Q}={{kind=\"python\", module=\"aqm.txt\", class=\"MyAqm\"}}", "expected a Python file")
s("python-qdisc-no-class", f"{Q}={{kind=\"python\", module=\"aqm.py\"}}", "missing: the class in aqm.py")
s("python-qdisc-module-not-string", f"{Q}={{kind=\"python\", module=5, class=\"MyAqm\"}}", "module")
add("python-qdisc-registered-builtin-name", "api", "sojourn.run(BASE, disciplines={'pfifo': dict})",
    "built-in discipline's name")
add("python-qdisc-registered-not-class", "api", "sojourn.run(BASE, disciplines={'my_aqm': 5})", "must name a class")
add("python-qdisc-registered-not-dict", "api", "sojourn.validate(BASE, disciplines=['my_aqm'])",
    "expected a dict of name -> class")
add("python-qdisc-unregistered-name", "api",
    "sojourn.validate(with_(BASE, 'topology.bottleneck.qdisc', {'kind': 'python', 'class': 'my_aqm'}))",
    "registered: none")
add("python-qdisc-kernel-engine", "api", "sojourn.emulate(BASE, kernel=True, disciplines={'my_aqm': dict})",
    "emulate without kernel=True")

# --- latency probes, isochronous streams and Flent's named tests (issue 37, docs/tests.md) --
s("ping-interval-too-short", f"{W0}={{kind=\"ping\", pair=0, interval=\"10us\"}}", "at least 100us", cli=True)
s("ping-protocol-unknown", f"{W0}={{kind=\"ping\", pair=0, protocol=\"tcp\"}}", "protocol")
s("ping-size-too-small", f"{W0}={{kind=\"ping\", pair=0, packet_size=\"20B\"}}", "outside 42..1514 B")
s("isochronous-no-interval", f"{W0}={{kind=\"isochronous\", pair=0, packet_size=\"214B\"}}", "interval: required")
s("isochronous-no-size", f"{W0}={{kind=\"isochronous\", pair=0, interval=\"20ms\"}}", "packet_size: required")
s("bulk-dscp-out-of-range", f"{W1}.dscp=64", "dscp")
s("workload-test-not-table", f"{W1}.test=5", "expected a table")
s("rrul-pair-out-of-range", f"{W0}={{kind=\"rrul\", pair=5}}", "workload[0].pair: expected a pair index", cli=True)
s("rrul-unknown-key", f"{W0}={{kind=\"rrul\", streams=4}}", "unknown key for the rrul test")
s("rrul-server-without-client", f"{W0}={{kind=\"rrul\", server=\"s0\"}}", "workload[0].client: required")
s("tcp-nup-zero-streams", f"{W0}={{kind=\"tcp_nup\", streams=0}}", "streams in 1..64")
s("rtt-fair-one-pair", f"{W0}={{kind=\"rtt_fair\", pairs=[0]}}", "at least two pairs")
s("voip-unknown-codec", f"{W0}={{kind=\"voip\", codec=\"opus\"}}", "unknown codec 'opus'")
s("voip-bad-jitter-buffer", f"{W0}={{kind=\"voip\", jitter_buffer=\"soon\"}}", "jitter_buffer: expected a duration")
s("voip-bad-direction", f"{W0}={{kind=\"voip\", direction=\"sideways\"}}", "direction")
add("test-unknown-name", "cli", ["test", "rrull", "--rate", "10Mbit", "--rtt", "40ms", "--out", "{out}"],
    "unknown test 'rrull' (did you mean 'rrul'?)", cli=True)
add("test-bad-rate", "cli", ["test", "rrul", "--rate", "fast", "--rtt", "40ms", "--out", "{out}"], "--rate: 'fast' is not a rate")
add("test-three-rates", "cli", ["test", "rrul", "--rate", "1Mbit/2Mbit/3Mbit", "--rtt", "40ms", "--out", "{out}"],
    "expected DOWN or DOWN/UP")
add("test-bad-rtt", "cli", ["test", "rrul", "--rate", "10Mbit", "--rtt", "0ms", "--out", "{out}"], "--rtt: expected a positive")
add("test-bad-qdisc", "cli", ["test", "rrul", "--rate", "10Mbit", "--rtt", "40ms", "--qdisc", "fq_codle", "--out", "{out}"],
    "--qdisc:")
add("test-bad-duration", "cli", ["test", "rrul", "--rate", "10Mbit", "--rtt", "40ms", "--duration", "long", "--out", "{out}"],
    "--duration: expected a duration")
# --- application workloads: rpm, web, video (docs/tests.md) ------------------------------
_APP = 'duration = "1s"\n[topology]\nbottleneck = { rate = "10Mbit" }\n[[workload]]\n'
add("app-video-ladder-decreasing", "toml", _APP + 'kind = "video"\nbitrates = ["2Mbit", "1Mbit"]\n',
    "workload[0].bitrates[1]: the ladder must increase strictly", cli=True)
add("app-video-ladder-not-rate", "toml", _APP + 'kind = "video"\nbitrates = [5]\n', "expected a rate")
add("app-video-cushion-past-buffer", "toml", _APP + 'kind = "video"\nreservoir = "20s"\ncushion = "20s"\n',
    "exceeds max_buffer")
add("app-video-startup-past-buffer", "toml", _APP + 'kind = "video"\nstartup_segments = 100\n', "do not fit")
add("app-rpm-window-past-phase", "toml", _APP + 'kind = "rpm"\nphase = "2s"\nwindow = "5s"\n',
    "workload[0].window")
add("app-rpm-direction-unknown", "toml", _APP + 'kind = "rpm"\ndirections = "sideways"\n', "downlink")
add("app-rpm-no-connections", "toml", _APP + 'kind = "rpm"\nconnections = 0\n', "workload[0].connections")
add("app-web-empty-request", "toml", _APP + 'kind = "web"\nrequest_size = "0B"\n', "outside 1 B..1 GiB")
add("app-web-typo", "toml", _APP + 'kind = "web"\nobject = "5kB"\n', "workload[0].object")
# --- Wi-Fi (issue 38, docs/wifi.md) --------------------------------------------------------
WIFI = """\
duration = "2s"
[topology]
kind = "wifi"
{topo}
[[topology.stations]]
{sta}
[[workload]]
kind = "bulk"
pair = 0
"""


def wifi(id: str, expect: str, topo: str = "", sta: str = "mcs = 7", cli: bool = False) -> None:
    add(id, "toml", WIFI.format(topo=topo, sta=sta), expect, cli=cli)


add("wifi-no-stations", "toml", 'duration = "1s"\n[topology]\nkind = "wifi"\n',
    "topology.stations: required", cli=True)
wifi("wifi-mac-unknown", "topology.mac", topo='mac = "fq"')
wifi("wifi-aql-with-fifo", "topology.aql: AQL is part of mac80211", topo='mac = "fifo"\naql = true')
wifi("wifi-aql-low-above-high", "topology.aql_low: must not be above aql_high",
     topo='aql_low = "20ms"\naql_high = "5ms"')
wifi("wifi-ampdu-airtime-zero", "topology.ampdu_airtime", topo='ampdu_airtime = "0ms"')
wifi("wifi-ampdu-frames-zero", "topology.ampdu_frames", topo="ampdu_frames = 0")
wifi("wifi-mcs-too-high-ht", "topology.stations[0].mcs: mcs 8 is above", sta="mcs = 8", cli=True)
wifi("wifi-vht20-mcs9", "not a valid combination", sta='standard = "vht"\nmcs = 9')
wifi("wifi-width-80-ht", "width 80 MHz", sta="mcs = 3\nwidth = 80")
wifi("wifi-gi-unknown", "topology.stations[0].gi", sta='mcs = 3\ngi = "medium"')
wifi("wifi-gi-1600-ht", "guard interval 1600 ns", sta='mcs = 3\ngi = "1.6us"')
wifi("wifi-rate-and-mcs", "give either `rate` or `mcs`", sta='mcs = 3\nrate = "54Mbit"')
wifi("wifi-no-rate", "topology.stations[0].mcs: required", sta="loss = 0.1")
wifi("wifi-loss-one", "topology.stations[0].loss", sta="mcs = 3\nloss = 1.0")
wifi("wifi-schedule-with-mcs", "needs a fixed `rate`", sta='mcs = 3\nrate_schedule = [{ at = "1s", rate = "6Mbit" }]')
wifi("wifi-station-typo", "topology.stations[0].streem: unknown key", sta="mcs = 3\nstreem = 2")
wifi("wifi-topology-typo", "topology.aqll: unknown key", topo="aqll = true")
add("wifi-pair-out-of-range", "toml", WIFI.format(topo="", sta="mcs = 3").replace("pair = 0", "pair = 1"),
    "workload[0].pair")
add("wifi-deploy-refused", "api", "__import__('sojourn.deploy').deploy.plan(" + repr({
    "duration": "1s", "topology": {"kind": "wifi", "stations": [{"mcs": 7}]},
    "workload": [{"kind": "bulk", "pair": 0}]}) + ", node='ap')", "has no tc/nft form")
# --- ISP subscriber trees (issue 36, docs/isp.md) ----------------------------------------
ISP = """duration = "1s"
[topology]
kind = "isp"
subscribers = 4
uplink = { rate = "100Mbit" }
plans = [ { down = "20Mbit", up = "5Mbit", share = 1 } ]
active = 0.5
[[workload]]
kind = "bulk"
between = "servers->subscribers"
"""
for id_, old, new, frag in [
    ("isp-no-plans", 'plans = [ { down = "20Mbit", up = "5Mbit", share = 1 } ]\n', "", "topology.plans: required"),
    ("isp-empty-plans", 'plans = [ { down = "20Mbit", up = "5Mbit", share = 1 } ]', "plans = []",
     "topology.plans: needs at least one plan"),
    ("isp-negative-share", "share = 1", "share = -0.5", "topology.plans[0].share: must be positive"),
    ("isp-active-above-1", "active = 0.5", "active = 1.5", "topology.active"),
    ("isp-active-none", "active = 0.5", "active = 0.0", "selects none"),
    ("isp-plan-faster-than-uplink", 'down = "20Mbit"', 'down = "1Gbit"', "faster than the uplink"),
    ("isp-plan-no-up", ', up = "5Mbit"', "", "topology.plans[0].up: required"),
    ("isp-uplink-qdisc", 'uplink = { rate = "100Mbit" }', 'uplink = { rate = "100Mbit", qdisc = "fq_codel" }',
     "topology.uplink.qdisc: generated by the isp topology"),
    ("isp-no-uplink", 'uplink = { rate = "100Mbit" }\n', "", "topology.uplink: required"),
    ("isp-no-subscribers", "subscribers = 4\n", "", "topology.subscribers: required"),
    ("isp-too-many-subscribers", "subscribers = 4", "subscribers = 70000", "do not fit one HTB"),
    ("isp-between-and-pair", 'between = "servers->subscribers"', 'between = "servers->subscribers"\npair = 0',
     "give either `between` or from/to/pair(s)"),
    ("isp-between-unknown", 'between = "servers->subscribers"', 'between = "everyone"', "workload[0].between"),
    ("isp-rtt-too-short", 'uplink = { rate = "100Mbit" }', 'uplink = { rate = "100Mbit", delay = "10ms" }\nrtt = "10ms"',
     "topology.rtt: an RTT of 10ms is shorter"),
    ("isp-unknown-key", "active = 0.5", "active = 0.5\nsubscriber = 4", "topology.subscriber"),
]:
    assert old in ISP, id_
    add(id_, "toml", ISP.replace(old, new), frag, cli=id_ == "isp-negative-share")
add("isp-deploy-without-addresses", "api",
    "__import__('sojourn.deploy').deploy.plan({'duration': '1s', 'topology': {'kind': 'isp', 'subscribers': 2, "
    "'uplink': {'rate': '10Mbit'}, 'plans': [{'down': '5Mbit', 'up': '1Mbit'}]}, 'workload': [{'kind': 'bulk', "
    "'between': 'servers->subscribers'}]}, 'core', {'uplink': 'eth1', 'server0.down': 'eth0'})",
    "topology.addresses: required to deploy an isp tree")
add("isp-addresses-too-few", "toml", ISP.replace("active = 0.5", 'active = 0.5\naddresses = "100.64.0.0/30"'),
    "topology.addresses: 100.64.0.0/30 holds 2 host addresses, fewer than the 4 subscribers")
add("isp-between-on-dumbbell", "toml", BASE_TOML.replace('kind = "bulk"\npair = 1', 'kind = "bulk"\nbetween = "servers->subscribers"'),
    "workload[1].between: only on an isp topology")
assert 'kind = "bulk"\npair = 1' in BASE_TOML

# --- emulate --kernel on isp trees (docs/isp.md, "The other engines") --------------------
_KISP = ("{'duration': '1s', 'topology': {'kind': 'isp', 'subscribers': 2, 'uplink': {'rate': '10Mbit'}, "
         "'plans': [{'down': '5Mbit', 'up': '1Mbit'}]%s}, 'workload': [{'kind': 'bulk', "
         "'between': 'servers->subscribers'}]}")
add("isp-kernel-ipv6", "api", "sojourn.emulate(" + _KISP[:-1] % "" + ", 'transport': {'ip': 6}}, kernel=True)",
    "transport.ip: the kernel engine's isp router forwards IPv4")
