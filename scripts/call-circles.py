#!/usr/bin/python3
"""Finds file-level call circles and header include circles in emunic.

Calls: for every object file of the tree (build/obj by default), the global
functions it defines and the ones it uses (nm); a use of a name another file
defines is an arrow from the user's source file to the definer's.  Includes:
the project headers each header includes.  A circle is a strongly connected
set of two or more files.  Calls between files must point one way (DESIGN:
"no circles"), so any circle is a failure.

    scripts/call-circles.py [--obj DIR] [--src DIR] [--graph]

Exit status: 0 no circle, 1 circles found (each printed with the arrows
that close it), 2 usage or tool error.
"""
import argparse
import collections
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def nm(path):
    out = subprocess.run(["nm", "--defined-only", "-g", path], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    und = subprocess.run(["nm", "-u", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if out.returncode or und.returncode:
        raise SystemExit("call-circles: nm %s failed: %s" % (path, out.stderr or und.stderr))
    defs = {l.split()[-1] for l in out.stdout.splitlines() if l.split()[-2:-1] in (["T"], ["D"], ["B"], ["R"])}
    uses = {l.split()[-1] for l in und.stdout.splitlines() if l.strip()}
    return defs, uses


def call_graph(objdir, srcdir=ROOT):
    files = {}
    for d, _, names in os.walk(objdir):
        for n in names:
            if n.endswith(".o"):
                p = os.path.join(d, n)
                src = os.path.relpath(p, objdir)[:-2] + ".c"
                if os.path.exists(os.path.join(srcdir, src)):   # not a stale object
                    files[src] = nm(p)
    owner = {}
    for f, (defs, _) in files.items():
        for s in defs:
            owner[s] = f
    g = collections.defaultdict(dict)
    for f, (_, uses) in files.items():
        for s in uses:
            o = owner.get(s)
            if o and o != f:
                g[f].setdefault(o, s)          # one name that makes the arrow
    return files.keys(), g


INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)


def include_graph():
    heads = {}
    for d in ("include", "emunic", "engines", "baseline", "tools", "shim"):
        for dp, _, names in os.walk(os.path.join(ROOT, d)):
            for n in names:
                if n.endswith(".h"):
                    p = os.path.relpath(os.path.join(dp, n), ROOT)
                    heads[p] = p
    def resolve(name):
        for cand in (name, os.path.join("include", name)):
            if cand in heads:
                return cand
        return None
    g = collections.defaultdict(dict)
    for h in heads:
        with open(os.path.join(ROOT, h)) as f:
            for inc in INCLUDE.findall(f.read()):
                t = resolve(inc)
                if t and t != h:
                    g[h][t] = "#include"
    return heads.keys(), g


def circles(nodes, g):
    """Tarjan's strongly connected components of two or more nodes."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        work = [(v, iter(sorted(g.get(v, {}))))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            u, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g.get(w, {})))))
                    break
                if w in on:
                    low[u] = min(low[u], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[u])
                if low[u] == index[u]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == u:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--obj", default=os.path.join(ROOT, "build", "obj"),
                    help="object tree to read (default build/obj)")
    ap.add_argument("--src", default=ROOT, help="the sources the objects were built from (default: this tree)")
    ap.add_argument("--graph", action="store_true", help="print every file-level arrow too")
    a = ap.parse_args()
    if not os.path.isdir(a.obj):
        print("call-circles: no object tree at %s (run make first)" % a.obj, file=sys.stderr)
        return 2
    found = 0
    for kind, (nodes, g) in (("call", call_graph(a.obj, a.src)), ("include", include_graph())):
        if a.graph:
            for f in sorted(g):
                for t, s in sorted(g[f].items()):
                    print("%s %s -> %s (%s)" % (kind, f, t, s))
        for comp in circles(nodes, g):
            found += 1
            members = set(comp)
            print("%s circle of %d files: %s" % (kind, len(comp), " ".join(comp)))
            for f in comp:
                for t, s in sorted(g[f].items()):
                    if t in members:
                        print("    %s -> %s (%s)" % (f, t, s))
        print("call-circles: %d file(s) checked for %s circles" % (len(nodes), kind))
    print("call-circles: %s" % ("no circles" if not found else "%d circle(s)" % found))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
