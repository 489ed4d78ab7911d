"""JITGRAD_LOG=recompiles names what changed: a scalar attribute of an object
the program reaches (a module's flag or size), by the path the program uses."""
import subprocess
import sys
import textwrap


def run_logged(src):
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(src)], capture_output=True,
                       text=True, env={**__import__("os").environ, "JITGRAD_LOG": "recompiles"})
    assert p.returncode == 0, p.stderr
    return p.stdout, [line for line in p.stderr.splitlines() if line.startswith("jitgrad:")]


def test_module_attribute_change_is_named():
    out, log = run_logged("""
        import jitgrad as torch
        class M(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = torch.nn.Linear(3, 3)
                self.scale = 2.0
            def forward(self, x):
                return self.lin(x) * self.scale
        m = M()
        cm = torch.compile(m, backend="interp")
        x = torch.ones(2, 3)
        a = cm(x)
        m.scale = 3.0
        b = cm(x)
        print(bool(((b - a * 1.5).abs() < 1e-6).all()))
        m.eval()
        cm(x)
    """)
    assert out.split() == ["True"]
    assert "jitgrad: attribute self.scale changed: 2.0 -> 3.0" in log
    assert "jitgrad: attribute self.training changed: True -> False" in log
    assert "jitgrad: attribute self.lin.training changed: True -> False" in log
    assert sum(line.startswith("jitgrad: recompiling") for line in log) == 2


def test_no_attribute_line_when_nothing_changed():
    _, log = run_logged("""
        import jitgrad as torch
        lin = torch.nn.Linear(2, 2)
        f = torch.compile(lambda x: lin(x), backend="interp")
        for _ in range(3):
            f(torch.ones(1, 2))
    """)
    assert not any("attribute" in line or "recompiling" in line for line in log), log
