"""The source tree's shape: calls between files point one way (no file-level
call circle, no header include circle), as scripts/call-circles.py finds them
from the built objects' symbols (nm) and the headers' includes; no file under
tools/ is over 700 lines, and the README's layout names each of them."""
import os
import re
import subprocess

from conftest import ROOT


def test_no_call_or_include_circles():
    p = subprocess.run(["/usr/bin/python3", "scripts/call-circles.py"], cwd=ROOT, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT)
    out = p.stdout.decode(errors="replace")
    assert p.returncode == 0, out
    assert "call-circles: no circles" in out, out
    # It read the whole library, the tools and the benchmark, not an empty tree.
    n = int(out.split("call-circles: ")[1].split(" file(s)")[0])
    assert n >= 60, out


def test_call_circles_finds_a_circle(tmp_path):
    """The check can fail: two objects that call each other are a circle."""
    src = tmp_path / "src"
    (src / "a").mkdir(parents=True)
    (src / "a" / "x.c").write_text("void y(void); void x(void) { y(); }\n")
    (src / "a" / "y.c").write_text("void x(void); void y(void) { x(); }\n")
    obj = tmp_path / "obj"
    for n in ("x", "y"):
        (obj / "a").mkdir(parents=True, exist_ok=True)
        subprocess.run(["cc", "-c", str(src / "a" / (n + ".c")), "-o", str(obj / "a" / (n + ".o"))], check=True)
    p = subprocess.run(["/usr/bin/python3", "scripts/call-circles.py", "--obj", str(obj),
                        "--src", str(src)], cwd=ROOT,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = p.stdout.decode(errors="replace")
    assert p.returncode == 1, out
    assert "call circle of 2 files: a/x.c a/y.c" in out, out


TOOL_MAX_LINES = 700


def test_no_tool_source_file_is_over_700_lines():
    """The tools stay lean (issue 21): no file under tools/ over 700 lines;
    one that grows past it is split by job."""
    long = []
    for d, _, names in os.walk(os.path.join(ROOT, "tools")):
        for n in names:
            if n.endswith((".c", ".h")):
                p = os.path.join(d, n)
                with open(p, errors="replace") as f:
                    lines = sum(1 for _ in f)
                if lines > TOOL_MAX_LINES:
                    long.append("%s: %d lines" % (os.path.relpath(p, ROOT), lines))
    assert not long, "over %d lines: %s" % (TOOL_MAX_LINES, ", ".join(long))


def test_readme_layout_names_every_tool_file():
    """The README's layout lists each file of the tools' directories."""
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()
    layout = readme[readme.index("## Layout"):]
    missing = []
    for d in ("tools/run", "tools/info", "tools/bench"):
        for n in sorted(os.listdir(os.path.join(ROOT, d))):
            if n.endswith((".c", ".h")) and not re.search(r"\b%s\b" % re.escape(n), layout):
                missing.append("%s/%s" % (d, n))
    assert not missing, "the README's layout does not name: " + ", ".join(missing)


# ---- the device interface (issue 20) ------------------------------------------

# The data path by name, called or not (a function pointer or a #define
# names it too), the extended and SRQ forms, librdmacm's inline wrappers
# (they call ibv_post_send / ibv_poll_cq themselves), and a provider's ops
# reached directly.
VERBS_DATA_PATH = re.compile(r"\b(ibv_(?:post_send|post_recv|poll_cq|post_srq_recv|start_poll|next_poll|wr_(?!opcode\b)\w+)"
                             r"|rdma_post_\w+|rdma_get_(?:send|recv)_comp)\b|->\s*ops\.(?:post_send|post_recv|poll_cq)\b")
# The control path: the objects the data path uses and the completion
# events a progress loop sleeps on (issue 20: "reach a device only through
# it"), by libibverbs', librdmacm's and mlx5dv's names.  Opening a device
# (context, PD, queries: emunic/device.c) and making a completion channel
# (a file descriptor: emunic/client/dev.c, baseline/ptp_cq.c) are not.
VERBS_OBJECTS = re.compile(r"\b(ibv_(?:create_cq(?:_ex)?|destroy_cq|resize_cq|create_qp(?:_ex)?|modify_qp|destroy_qp"
                           r"|reg_mr(?:_iova2?)?|rereg_mr|reg_dmabuf_mr|dereg_mr|alloc_mw|bind_mw|get_cq_event"
                           r"|ack_cq_events|req_notify_cq|create_srq(?:_ex)?|destroy_srq)"
                           r"|rdma_(?:create|destroy)_qp|rdma_reg_\w+|rdma_dereg_mr|mlx5dv_create_\w+)\b")
C_NOISE = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)


# A legacy CORE-Direct program (it includes <infiniband/verbs_exp.h> and no
# emunic header): its ibv_post_recv / ibv_poll_cq are the application's own
# calls on the shim's objects, which libibverbs dispatches to
# shim/verbs_exp's context ops, and they stay as CORE-Direct code wrote them.
LEGACY = re.compile(r'^\s*#\s*include\s*<infiniband/verbs_exp\.h>', re.M)
EMUNIC_HEADER = re.compile(r'^\s*#\s*include\s*[<"](?:emunic[./]|shim/|engines/|baseline/)', re.M)


def legacy_verbs_program(text):
    return bool(LEGACY.search(text)) and not EMUNIC_HEADER.search(text)


def verbs_calls_outside_shim(root, pattern=VERBS_DATA_PATH):
    """Every call of ibv_post_send, ibv_post_recv or ibv_poll_cq (or what
    pattern names) in a C file of root outside shim/ (and build/) and the
    legacy verbs_exp program, as "path:line: name"; comments and strings
    that name them do not count."""
    found = []
    for d, dirs, names in os.walk(root):
        rel = os.path.relpath(d, root)
        if rel.split(os.sep)[0] in ("shim", "build", ".git"):
            dirs[:] = []
            continue
        dirs.sort()
        for n in sorted(names):
            if not n.endswith((".c", ".h")):
                continue
            p = os.path.join(d, n)
            with open(p, errors="replace") as f:
                text = f.read()
            if legacy_verbs_program(text):
                continue
            # Blank comments and strings, keeping their newlines for line numbers.
            code = C_NOISE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
            for m in pattern.finditer(code):
                found.append("%s:%d: %s" % (os.path.relpath(p, root), code.count("\n", 0, m.start()) + 1,
                                            m.group(1) or m.group(0).replace(" ", "")))
    return found


def test_no_verbs_data_path_calls_outside_shim():
    """Only shim/ posts and polls: everything else goes through the device's
    ops table (shim/shim.h), so a backend sees every work request."""
    found = verbs_calls_outside_shim(ROOT)
    assert not found, "verbs called directly outside shim/ (use emunic_shim_*): " + ", ".join(found)


def test_no_verbs_object_calls_outside_shim():
    """CQs, QPs, memory regions and completion events too: created,
    changed and destroyed through the device's ops table (shim/shim.h), so
    a backend that builds its own queues sees them all."""
    found = verbs_calls_outside_shim(ROOT, VERBS_OBJECTS)
    assert not found, "verbs objects made directly outside shim/ (use emunic_shim_*): " + ", ".join(found)


def test_verbs_call_check_finds_a_call(tmp_path):
    """The check can fail: a call is found, a comment or string naming one
    is not, and shim/ may call them."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.c").write_text(
        "/* ibv_post_send(qp, wr, bad) in a comment */\n"
        "static const char *s = \"ibv_poll_cq(cq, 1, wc)\";\n"
        "int f(void) { return ibv_post_recv (qp, wr, bad); }\n")
    (tmp_path / "shim").mkdir()
    (tmp_path / "shim" / "y.c").write_text("int g(void) { return ibv_post_send(qp, wr, bad); }\n")
    assert verbs_calls_outside_shim(str(tmp_path)) == ["a/x.c:3: ibv_post_recv"]
    # Named without a call, through a provider's ops, librdmacm's wrappers,
    # the extended API: all found.
    (tmp_path / "a" / "z.c").write_text(
        "#define POST ibv_post_send\n"
        "int h(void) { return qp->context->ops.poll_cq(cq, 1, wc); }\n"
        "int i(void) { return rdma_post_send(id, ctx, buf, len, mr, 0); }\n"
        "void j(void) { ibv_wr_send(qpx); }\n")
    assert verbs_calls_outside_shim(str(tmp_path)) == [
        "a/x.c:3: ibv_post_recv", "a/z.c:1: ibv_post_send", "a/z.c:2: ->ops.poll_cq", "a/z.c:3: rdma_post_send",
        "a/z.c:4: ibv_wr_send"]
    # A legacy verbs_exp program (its header, no emunic one) keeps its own
    # calls; the same calls beside an emunic header do not pass.
    legacy = "#include <infiniband/verbs_exp.h>\nint k(void) { return ibv_poll_cq(cq, 1, wc); }\n"
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "legacy.c").write_text(legacy)
    (tmp_path / "b" / "mixed.c").write_text("#include <emunic.h>\n" + legacy)
    assert verbs_calls_outside_shim(str(tmp_path))[-1:] == ["b/mixed.c:3: ibv_poll_cq"]
    # The control path: found by its own pattern, not the data path's.
    (tmp_path / "a" / "c.c").write_text("void l(void) { cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);\n"
                                        "ibv_destroy_qp(qp); }\n")
    assert verbs_calls_outside_shim(str(tmp_path), VERBS_OBJECTS) == ["a/c.c:1: ibv_create_cq",
                                                                      "a/c.c:2: ibv_destroy_qp"]
