"""``sojourn deploy …``: the command line of :mod:`sojourn.deploy` (plan, check) and
:mod:`sojourn.deploy.apply` (apply, remove). docs/deploy.md."""
from __future__ import annotations

import argparse
from typing import Optional, Sequence, Union

from .. import deploy as _d
from .._cli_common import fail, parse_set
from .._config import ConfigError
from ..deploy import apply as _apply

DEPLOY_EPILOG = """\
examples:
  sojourn deploy plan experiments/repro/age-based/age-1g.toml --node client --iface eth0
  sojourn deploy plan experiments/repro/age-based/age-1g.toml --node client --iface eth0 \\
      --set 'topology.links[0].qdisc="pfifo_fast"' \\
      --set 'classifier=[{at="client", hook="output", map=[{upto=6331208, priority="1:6"}, {priority="1:0"}]}]'
  sojourn deploy plan exp.toml --node router --iface bottleneck=eth1 --device-rate 1Gbit
  sojourn deploy check
  sojourn deploy check --plan exp.toml --node client
  sudo sojourn deploy apply exp.toml --node client --iface eth0 --device-rate 1Gbit
  sudo sojourn deploy apply exp.toml --node client --iface veth0 --netns lab1
  sudo sojourn deploy remove exp.toml --node client --iface eth0 --device-rate 1Gbit

`plan` prints a shell script (tc + nft -f) and changes nothing; what Linux cannot express is
refused with one line (exit 2) naming the key; run that with `sojourn emulate`. `check` lists
the qdisc kinds this kernel has (probed in a throw-away namespace: needs root), whether nft and
its ct expressions load, and what a plan would need that is missing. `apply` puts the plan on
the devices all or nothing (tried first in a throw-away namespace; tc rolled back if a step
fails; the classifier in one nft transaction); applying twice changes nothing; `remove` gives
the devices their default qdisc back and deletes the nft table. Give `remove` the same
arguments as `apply`. apply/remove need root. docs/deploy.md.
"""


def _ifaces(items: Optional[Sequence[str]]) -> Union[None, str, dict[str, str]]:
    if not items:
        return None
    if len(items) == 1 and "=" not in items[0]:
        return items[0]
    out = {}
    for it in items:
        if "=" not in it:
            raise ConfigError("--iface", it, "with several --iface, each must be LINK=DEV")
        k, v = it.split("=", 1)
        out[k.strip()] = v.strip()
    return out


_parse_set = parse_set  # one parser for every command (_cli_common)


def _plan(a, experiment: str) -> _d.Plan:
    try:
        return _d.plan(experiment, a.node, _ifaces(a.iface), overrides=_parse_set(a.set), device_rate=a.device_rate)
    except ConfigError as e:
        raise ConfigError("--set", e.path, e.msg) if e.file == "overrides" else e


def cmd_plan(a) -> int:
    try:
        p = _plan(a, a.experiment)
    except ConfigError as e:
        return fail(str(e))
    print(p.script(), end="")
    return 0


def cmd_check(a) -> int:
    p = None
    if a.plan or a.node:
        if not (a.plan and a.node):
            return fail("deploy check: --plan and --node go together")
        try:
            p = _plan(a, a.plan)
        except ConfigError as e:
            return fail(str(e))
    try:
        c = _d.check(p)
    except OSError as e:
        return fail(f"deploy check: {e}")
    print(_d.check_text(c), end="")
    if p is not None:
        if c.missing:
            print(f"plan for node {p.node!r} needs, missing here: " + "; ".join(c.missing))
            return 1
        print(f"plan for node {p.node!r}: everything it needs is here ({', '.join(p.kinds())}"
              + (", nft ct" if p.nft else "") + ")")
    return 0


def _cmd_live(a, action) -> int:
    try:
        # privilege before anything else (the plan itself needs none, but a refusal should
        # not depend on whether the file happens to be valid)
        _apply.require_privilege(f"deploy {a.deploy_cmd}", a.netns)
        p = _plan(a, a.experiment)
        rep = action(p, a.netns)
    except (ConfigError, _apply.DeployError) as e:
        return fail(str(e))
    except OSError as e:
        return fail(f"deploy {a.deploy_cmd}: {e}")
    print(rep.text(), end="")
    return 0


def cmd_apply(a) -> int:
    return _cmd_live(a, _apply.apply)


def cmd_remove(a) -> int:
    return _cmd_live(a, _apply.remove)


def cmd_threshold(a) -> int:
    import sys

    from ..deploy import watch as _watch

    if not a.watch:
        return fail("deploy threshold: only --watch exists (adapt a live map); "
                    "`sojourn threshold` computes a threshold offline")
    try:
        _apply.require_privilege("deploy threshold --watch", a.netns)
        dur = _seconds(a.duration, "--duration")
        interval = _seconds(a.interval, "--interval")
        window = _seconds(a.window, "--window")
        rate = None
        if a.link_rate is not None:
            from ..api import _engine_or_fail

            try:
                rate = float(_engine_or_fail().parse_rate(a.link_rate))
            except ValueError as e:
                raise ConfigError("--link-rate", a.link_rate, str(e)) from None
        if not 0 <= a.hysteresis < 10:
            raise ConfigError("--hysteresis", str(a.hysteresis), "expected a fraction such as 0.2 (±20 %)")
        out = open(a.log, "a") if a.log else sys.stdout
        try:
            _watch.watch(a.experiment, a.node, _ifaces(a.iface), netns=a.netns, policy=a.policy, duration_s=dur,
                         interval_s=interval, window_s=window, hysteresis=a.hysteresis, min_flows=a.min_flows,
                         rate_bps=rate, device_rate=a.device_rate, overrides=_parse_set(a.set), out=out)
        finally:
            if a.log:
                out.close()
    except (ConfigError, _apply.DeployError) as e:
        return fail(str(e))
    except OSError as e:
        return fail(f"deploy threshold: {e}")
    return 0


def _seconds(text: str, what: str) -> float:
    from ..api import _engine_or_fail

    try:
        ns = _engine_or_fail().parse_duration_ns(text)
    except ValueError as e:
        raise ConfigError(what, text, str(e)) from None
    if not ns > 0:
        raise ConfigError(what, text, "must be positive")
    return ns / 1e9


def add_parser(sub) -> None:
    d = sub.add_parser("deploy", help="Linux tc/nft for a node of an experiment (plan, check, apply, remove)",
                       epilog=DEPLOY_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    dsub = d.add_subparsers(dest="deploy_cmd", metavar="ACTION")
    d.set_defaults(func=lambda a: (d.print_help(), 2)[1])

    def common(sp, required: bool) -> None:
        sp.add_argument("--node", required=required, help="the node whose egress links and classifiers to deploy")
        sp.add_argument("--iface", action="append", metavar="DEV|LINK=DEV",
                        help="device of the node's egress link (default: the link's name); LINK=DEV for several")
        sp.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a key of the file (repeatable)")
        sp.add_argument("--device-rate", metavar="RATE",
                        help='line rate of the devices, e.g. "10Gbit": slower links are shaped with htb')

    def parser(name: str, help: str):
        return dsub.add_parser(name, help=help, epilog=DEPLOY_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)

    pp = parser("plan", "print the tc and nft commands (changes nothing)")
    pp.add_argument("experiment", help="experiment file (TOML)")
    common(pp, True)
    pp.set_defaults(func=cmd_plan)

    cp = parser("check", "which qdiscs and nft features this kernel has; what a plan misses")
    cp.add_argument("--plan", metavar="EXP.toml", help="an experiment file whose plan to check (with --node)")
    common(cp, False)
    cp.set_defaults(func=cmd_check)

    for name, func, help in [("apply", cmd_apply, "put the plan on the devices, all or nothing (root)"),
                             ("remove", cmd_remove, "take an applied plan off again (root)")]:
        ap = parser(name, help)
        ap.add_argument("experiment", help="experiment file (TOML)")
        common(ap, True)
        ap.add_argument("--netns", metavar="NS", help="the network namespace the devices live in (ip netns)")
        ap.set_defaults(func=func)

    tp = parser("threshold", "adapt an applied map's threshold to the live traffic (--watch; root)")
    tp.add_argument("experiment", help="experiment file (TOML)")
    common(tp, True)
    tp.add_argument("--netns", metavar="NS", help="the network namespace of the node (ip netns)")
    tp.add_argument("--watch", action="store_true", help="watch finished connections and update the map")
    tp.add_argument("--policy", choices=["mg1", "m/g/1", "median"], default="mg1",
                    help="mg1: optimal 2LPS threshold of the M/G/1 queue of the recent sizes and load, updated "
                         "beyond the hysteresis band; median: seed 000's, the median size of the last second")
    tp.add_argument("--duration", default="60s", help="how long to watch (bounded; default 60s)")
    tp.add_argument("--interval", default="1s", help="time between decisions (default 1s)")
    tp.add_argument("--window", default="30s", help="mg1: finished connections of this past period (default 30s)")
    tp.add_argument("--hysteresis", type=float, default=0.2, help="mg1: relative band kept (default 0.2 = ±20%%)")
    tp.add_argument("--min-flows", type=int, default=20, help="mg1: fewest connections to decide on (default 20)")
    tp.add_argument("--link-rate", metavar="RATE", help="mg1: the link's rate (default: the file's)")
    tp.add_argument("--log", metavar="FILE", help="append the JSON lines here instead of stdout")
    tp.set_defaults(func=cmd_threshold)


__all__ = ["add_parser", "DEPLOY_EPILOG"]
