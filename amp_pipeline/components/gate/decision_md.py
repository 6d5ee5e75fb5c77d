"""The gate's decision as people read it: the rules table (each rule's measure, threshold, interval
and outcome), the twins table, and decision.md."""

from __future__ import annotations

from amp_pipeline.components.gate.rules import HOW_IT_DECIDES


def _fmt(v) -> str:
    return "n/a" if v is None else f"{v:.4f}"


def _interval(r: dict) -> str:
    iv = r.get("interval")
    return "n/a" if not iv else f"[{iv[0]:+.4f}, {iv[1]:+.4f}]"


def _outcome(r: dict) -> str:
    return r.get("outcome") or ("skipped" if r["skipped"] else ("pass" if r["passed"] else "fail"))


def rules_table(rules: list[dict]) -> list[str]:
    """Every rule with its estimate, 95% interval, n, threshold, test, outcome and reason."""
    lines = [
        "| rule | estimate | 95% interval | n | threshold | test | outcome | reason |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rules:
        shown = {
            "skipped": "skipped (pass)",
            "fail": "**FAIL**",
            "unproven": "not proven (does not reject)",
        }.get(_outcome(r), _outcome(r))
        lines.append(
            f"| {r['name']} | {_fmt(r['value'])} | {_interval(r)} | {r.get('n') or 'n/a'} | "
            f"{_fmt(r['threshold'])} | {r.get('test', '')} | {shown} | {r['detail']} |"
        )
    return lines


def twins_table(decision: dict) -> list[str]:
    """Both twins' rules side by side: outcome, estimate and interval per twin (the twin rules,
    which measure AMP against the float32 twin, are n/a for the float32 twin)."""
    both = decision.get("twins")
    if not both:
        return []
    amp = {r["name"]: r for r in both["amp"]["rules"]}
    fp32 = {r["name"]: r for r in both["float32"]["rules"]}

    def cell(r: dict | None) -> str:
        if r is None:
            return "n/a (the reference)"
        parts = [_outcome(r)]
        parts += [_fmt(r["value"])] if r["value"] is not None else []
        parts += [_interval(r)] if r.get("interval") else []
        return " ".join(parts)

    names = list(amp) + [n for n in fp32 if n not in amp]
    policy = decision.get("shipped_policy") if decision.get("shipped_precision") == "amp" else ""
    lines = [
        f"| rule | AMP twin{f' ({policy})' if policy else ''} | float32 twin |",
        "|---|---|---|",
    ]
    lines += [f"| {n} | {cell(amp.get(n))} | {cell(fp32.get(n))} |" for n in names]
    verdict = {True: "passes", False: "fails"}
    lines += [
        f"| **decision** | {verdict[both['amp']['passed']]} | "
        f"{verdict[both['float32']['passed']]} |",
    ]
    return lines


def to_markdown(decision: dict) -> str:
    """decision.md: which twin shipped and why, both twins' rules side by side, then every rule
    of each twin with its estimate, 95% interval, n, test, outcome and reason."""
    from amp_pipeline.components.gate.twins import headline

    lines = [f"# Promotion gate: {headline(decision)}", ""]
    both = decision.get("twins")
    if both:
        lines += [
            f"Shipped: **{decision['shipped_precision']}**. {decision.get('why', '')}.",
            "",
            "## Both twins",
            "",
            *twins_table(decision),
            "",
            "## AMP twin",
            "",
            *rules_table(both["amp"]["rules"]),
            "",
            "## float32 twin (judged without the twin rules: it is their reference)",
            "",
            *rules_table(both["float32"]["rules"]),
        ]
    else:
        lines += rules_table(decision["rules"])
    unproven = [r["name"] for r in decision["rules"] if r.get("outcome") == "unproven"]
    lines += ["", HOW_IT_DECIDES]
    if unproven:
        lines += [
            "",
            f"Not proven: {', '.join(unproven)}. The estimate is within the threshold but the "
            "95% interval reaches past it; promoted by default, rejected with `--parity strict`.",
        ]
    if decision["failed"]:
        lines += ["", f"Rejected by: {', '.join(decision['failed'])}."]
    record = decision.get("speed_record")
    if record:
        from amp_pipeline.components.speed.record import lines as speed_lines

        uses = record["gate_uses"]
        lines += ["", f"## Speed and memory (the gate's min_speedup uses the {uses} ratio)", ""]
        lines += [f"- {line}" for line in speed_lines(record)]
    return "\n".join(lines) + "\n"
