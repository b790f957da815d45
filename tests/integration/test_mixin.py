"""The monitoring mixin (deploy/monitoring): the rules pass `promtool check rules` and their
unit tests (`promtool test rules`), every metric the rules and the dashboard name is one a
real lockscoped exports, and every dashboard query parses as PromQL."""
import json
import os
import re
import subprocess
import tempfile

from conftest import ROOT, Workload, require_tool

MIXIN = os.path.join(ROOT, "deploy", "monitoring")
RULES = os.path.join(MIXIN, "lockscope.rules.yml")
DASHBOARD = os.path.join(MIXIN, "lockscope.dashboard.json")
# what a query names: a recording rule (level:metric:operations) or an exported metric
RECORDED = re.compile(r"\b[a-z_]+:lockscope_[a-z_]+:[a-z0-9_]+\b")
METRIC = re.compile(r"(?<![:\w])lockscope_[a-z_]+\b")
# Grafana's variables, as a query would have them filled in
GRAFANA_VARS = {"$__rate_interval": "1m", "$instance": ".*", "$unit": ".*"}


def promtool(*args):
    require_tool("promtool")
    p = subprocess.run(["promtool", *args], capture_output=True, text=True, cwd=MIXIN, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def rule_exprs():
    """(name, expr) of every rule: each is a `record:` or `- alert:` line with its `expr:`
    on one line (promtool's check above reads the whole file as YAML)."""
    with open(RULES) as f:
        text = f.read()
    rules = re.findall(r"^\s*-? ?(?:record|alert): (\S+)\n(?:\s*#.*\n)*\s*expr: (.+)$", text, re.M)
    found = re.search(r"SUCCESS: (\d+) rules found", promtool("check", "rules", RULES))
    assert found and len(rules) == int(found.group(1)), rules
    return rules


def dashboard_exprs():
    with open(DASHBOARD) as f:
        dash = json.load(f)
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)), "panel ids repeat"
    return [t["expr"] for p in dash["panels"] for t in p["targets"]]


def exported_metrics(d):
    """Every metric family a real daemon exports (HELP lines are written with no samples too),
    histograms with their _bucket, _sum and _count."""
    text = d.cli("export", "-F", "prometheus").stdout
    names = set()
    for m in re.finditer(r"^# TYPE (\S+) (\S+)$", text, re.M):
        names.add(m.group(1))
        if m.group(2) == "histogram":
            names.update(m.group(1) + s for s in ("_bucket", "_sum", "_count"))
    return names


def test_rules_check_and_their_tests_pass():
    out = promtool("check", "rules", RULES)
    assert "SUCCESS" in out
    out = promtool("test", "rules", "lockscope.rules.test.yml")
    assert "SUCCESS" in out


def test_every_metric_named_is_exported(daemon):
    # some contention first, so that the lock series are there to be seen too
    w = Workload("mutex_server", "--until", "500", "--workers", "4")
    w.go()
    w.wait()
    exported = exported_metrics(daemon)
    recorded = {name for name, _ in rule_exprs() if ":" in name}
    for where, expr in [(n, e) for n, e in rule_exprs()] + [("dashboard", e) for e in dashboard_exprs()]:
        for name in RECORDED.findall(expr):
            assert name in recorded, f"{where}: {name} is no recording rule"
        for name in METRIC.findall(RECORDED.sub("", expr)):
            assert name in exported, f"{where}: lockscoped exports no {name}"


def test_dashboard_queries_parse():
    """Each query, its variables filled in, as a recording rule: promtool parses them all."""
    rules = []
    for i, expr in enumerate(dashboard_exprs()):
        for var, value in GRAFANA_VARS.items():
            expr = expr.replace(var, value)
        assert "$" not in expr, f"an unknown variable in {expr}"
        rules.append({"record": f"dashboard:query_{i}:check", "expr": expr})
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
        json.dump({"groups": [{"name": "dashboard", "rules": rules}]}, f)  # JSON is YAML
    try:
        assert f"SUCCESS: {len(rules)} rules found" in promtool("check", "rules", f.name)
    finally:
        os.unlink(f.name)
