"""Which twin ships: the AMP twin when it passes every rule, else the float32 twin when it
passes the rules that do not compare the twins, else none.

Both twins are trained, evaluated and exported in every run. The float32 twin is the reference
the twin rules (accuracy or error parity, speed) measure AMP against, so it needs no parity
proof against itself; it is judged on what any model must show before it ships: its accuracy
floor, that it beats the majority class (or the mean), that it is no worse than production on
the same paired evidence, that it serves, and its own TFLite variants' parity. With
`require_amp` (`--require-amp`) the run ships AMP or nothing, as before the float32 fallback.
"""

from __future__ import annotations

AMP, FLOAT32, NONE = "amp", "float32", "none"
PRECISIONS = (AMP, FLOAT32, NONE)


def _rule(decision: dict, name: str) -> dict | None:
    return next((r for r in decision["rules"] if r["name"] == name), None)


def why_not_amp(amp: dict) -> str:
    """What the AMP twin lost, in words a user reads first: 'AMP not faster here (precision
    ratio 0.96x)', 'AMP lost accuracy (-0.86 points)', and any other failed rule by name."""
    reasons = []
    for name in amp["failed"]:
        rule = _rule(amp, name) or {}
        value = rule.get("value")
        if name == "min_speedup":
            ratio = f"{value:.2f}x" if value is not None else "not measured"
            kind = "precision ratio" if "precision ratio" in rule.get("test", "") else "ratio"
            reasons.append(
                f"AMP not faster here ({kind} {ratio}, at least {rule['threshold']:.2f}x asked)"
            )
        elif name == "accuracy_parity" and value is not None:
            reasons.append(f"AMP lost accuracy ({value * 100:+.2f} points)")
        elif name == "error_parity" and value is not None:
            reasons.append(f"AMP's error rose (mean absolute error {value:+.2%})")
        else:
            reasons.append(f"AMP failed {name}")
    return "; ".join(reasons)


def choose(amp: dict, fp32: dict, require_amp: bool, amp_policy: str) -> dict:
    """The gate's decision from each twin's (rules.decision_of): `shipped_precision` (amp,
    float32 or none), why, and the shipped twin's rules as the decision's own `rules` and
    `failed` (the AMP twin's where none shipped); both twins' records under `twins`."""
    if amp["passed"]:
        shipped, why, chosen = AMP, f"the AMP twin ({amp_policy}) passed every rule", amp
    elif require_amp:
        shipped, chosen = NONE, amp
        why = f"{why_not_amp(amp)}; --require-amp: the float32 twin is not shipped"
    elif fp32["passed"]:
        shipped, why, chosen = FLOAT32, why_not_amp(amp), fp32
    else:
        shipped, chosen = NONE, amp
        why = f"{why_not_amp(amp)}; the float32 twin failed {', '.join(fp32['failed'])} as well"
    return {
        "passed": shipped != NONE,
        "decision": "promoted" if shipped != NONE else "rejected",
        "shipped_precision": shipped,
        "shipped_policy": {AMP: amp_policy, FLOAT32: "float32"}.get(shipped),
        "why": why,
        "require_amp": require_amp,
        "failed": chosen["failed"],
        "rules": chosen["rules"],
        "twins": {AMP: amp, FLOAT32: fp32},
    }


def headline(decision: dict) -> str:
    """The gate line of the run table and of decision.md: 'PROMOTED AMP twin
    (mixed_bfloat16)', 'PROMOTED float32 twin: AMP not faster here (...)', or 'REJECTED: ...'."""
    shipped = decision.get("shipped_precision", AMP if decision["passed"] else NONE)
    if shipped == AMP:
        return f"PROMOTED AMP twin ({decision.get('shipped_policy') or 'AMP'})"
    if shipped == FLOAT32:
        return f"PROMOTED float32 twin: {decision.get('why', '')}"
    failed = ", ".join(decision["failed"])
    twins = decision.get("twins") or {}
    fp32 = twins.get(FLOAT32)
    if decision.get("require_amp"):
        tail = " (--require-amp: the float32 twin is not shipped)"
    elif fp32 is not None and fp32["failed"]:
        tail = f"; the float32 twin failed {', '.join(fp32['failed'])}"
    else:
        tail = ""
    return f"REJECTED: failed {failed}{tail}" if failed else f"REJECTED{tail}"
