"""The six pictures, each shaped like a seed paper's figure: a function per
picture builds its Figure from a CSV directory (plots/run.sh's)."""
import os

from benchdata import DataError, Table, Targets, size_bytes, size_label, tables
from drawing import (COLORS, TARGET_COLOR, Figure, col, have, key2, plotcmd, q, rank_tics, size_tics,
                     status_count, yrange)

COLLS = ("bcast", "allreduce", "alltoall", "gather", "allgather")


IMPL_LABEL = {
    "ptp": "PTP (host-progressed)",
    "mq": "MQ (offloaded)",
    "mq-spin": "MQ, core spins",
    "mq-sleep": "MQ, core sleeps",
    "host": "host: app posts and polls verbs",
    "rtr-core": "RTR, progress core",
    "rtr-test": "RTR, started by the first test",
    "rtr-test-on-init": "RTR, test-on-init",
    "rtr-wait-on-send": "RTR, wait-on-send",
    "chunked-core": "chunked RDRP, progress core",
    "single": "one get a message",
    "static": "static full mesh",
    "on-demand": "on demand",
}


def label(impl):
    if impl.startswith("chunked-") and "/" in impl:
        s, c = impl[len("chunked-"):].split("/", 1)
        return "chunked: %s gets, <= %s in flight" % (s, c)
    return IMPL_LABEL.get(impl, impl)


def impl_order(impls, first=("ptp", "host", "single", "static")):
    return sorted(impls, key=lambda i: (i not in first, i))

RANKS_X = "set xlabel 'ranks (processes, one node)'"


def fig_barrier_latency(d, fmt):
    bars = tables(d, "barrier", 2)
    ranks = sorted(bars)
    f = Figure("01-barrier-latency", "Barrier latency vs ranks: offloaded (MQ) vs host-progressed (PTP)  "
               "[seed 003 figs. 4-5]", (2, 2), (1400, 1000), fmt)
    impls = impl_order({i for t in bars.values() for i in t.impls})
    for t in bars.values():
        t.need_impl("ptp")
        f.use(t)
    data = {}
    for k, impl in enumerate(impls):
        rows = []
        for n in ranks:
            t = bars[n]
            if impl not in t.impls:
                continue
            b, bp = t.get(impl, "barrier_latency"), t.get(impl, "barrier_latency_p50")
            ib, ibp = t.get(impl, "ibarrier_latency"), t.get(impl, "ibarrier_latency_p50")
            pb, pib = t.get("ptp", "barrier_latency"), t.get("ptp", "ibarrier_latency")
            rows.append([n, b, bp, ib, ibp, b / pb if pb > 0 else None, ib / pib if pib > 0 else None])
        data[impl] = rows
        f.add_data("b%d" % k, rows)
    for c, what, fig_no in ((1, "blocking barrier", "fig. 4"), (3, "ibarrier (post + wait)", "fig. 5")):
        plots, vals = [], []
        for k, impl in enumerate(impls):
            plots.append("$b%d using 1:%d lw 2 pt 7 lc rgb '%s' title %s" % (k, c + 1, COLORS[k], q(label(impl))))
            plots.append("$b%d using 1:%d lw 1 dt 2 pt 6 lc rgb '%s' notitle" % (k, c + 2, COLORS[k]))
            vals += col(data[impl], c) + col(data[impl], c + 1)
        f.panels.append("%s\n%s\nset title %s\nset ylabel 'latency (µs/call)'\nset logscale y\n%s\n"
                        "set key top left\n%s"
                        % (rank_tics(ranks), RANKS_X,
                           q("%s latency (%s); solid: mean, dashed: median" % (what, fig_no)),
                           yrange(vals, len(impls), log=True), plotcmd(plots)))
    for c, call in ((5, "barrier"), (6, "ibarrier")):
        spec, eng = [], []
        for n in ranks:
            tg = Targets(bars[n].out_path())
            spec.append([n, tg.limit("%s latency mq/ptp" % call)])
            eng.append([n, tg.limit("%s mean mq/ptp" % call)])
        f.add_data("tspec_" + call, spec)
        f.add_data("teng_" + call, eng)
        plots, vals = [], []
        for k, impl in enumerate(impls):
            if impl != "ptp":
                plots.append("$b%d using 1:%d lw 2 pt 7 lc rgb '%s' title %s" % (k, c + 1, COLORS[k], q(label(impl))))
                vals += col(data[impl], c)
        if have(spec):
            plots.append("$tspec_%s using 1:2 with linespoints lw 3 dt 2 pt 1 lc rgb '%s' "
                         "title 'target, MQ/PTP <= (spec)'" % (call, TARGET_COLOR))
        if have(eng):
            plots.append("$teng_%s using 1:2 with linespoints lw 2 dt 4 pt 2 lc rgb '#ff7f0e' "
                         "title 'target, mean <= (issue 18 engine)'" % call)
        plots.append("1 with lines lw 1 lc rgb '#555555' notitle")
        f.panels.append("%s\n%s\nset title %s\nset ylabel 'MQ / PTP (x, lower is better)'\nset logscale y\n%s\n"
                        "set key top right\n%s"
                        % (rank_tics(ranks), RANKS_X, q("%s mean latency, MQ / PTP, and the targets" % call),
                           yrange(vals, len(plots) - 1, log=True, extra=col(spec, 1) + col(eng, 1)), plotcmd(plots)))
    return f


def fig_cpu_availability(d, fmt):
    bars = tables(d, "barrier", 2)
    ranks = sorted(bars)
    f = Figure("02-cpu-availability", "CPU availability during an ibarrier: MQ vs PTP  [seed 003 figs. 6-7]",
               (1, 3), (1500, 600), fmt)
    impls = impl_order({i for t in bars.values() for i in t.impls})
    for t in bars.values():
        f.use(t)
    for k, impl in enumerate(impls):
        rows = []
        for n in ranks:
            t = bars[n]
            if impl in t.impls:
                rows.append([n, t.get(impl, "cpu_avail_work_slice"), t.get(impl, "cpu_avail_test_loop")])
        f.add_data("a%d" % k, rows)
    spec, eng = [], []
    for n in ranks:
        tg = Targets(bars[n].out_path())
        spec.append([n, tg.limit("work-slice availability (fig. 7)")])
        eng.append([n, tg.limit("availability (fig. 7) >=")])
    f.add_data("tspec", spec)
    f.add_data("teng", eng)
    plots = ["$a%d using 1:2 lw 2 pt 7 lc rgb '%s' title %s" % (k, COLORS[k], q(label(i))) for k, i in enumerate(impls)]
    if have(spec):
        plots.append("$tspec using 1:2 with linespoints lw 3 dt 2 pt 1 lc rgb '%s' title 'target, MQ >= (spec)'"
                     % TARGET_COLOR)
    if have(eng):
        plots.append("$teng using 1:2 with linespoints lw 2 dt 4 pt 2 lc rgb '#ff7f0e' "
                     "title 'target, MQ >= (issue 18 engine)'")
    f.panels.append("%s\n%s\nset title 'one work slice after the post (fig. 7)'\n"
                    "set ylabel 'CPU availability (%% of the raw ibarrier time)'\n%s; set ytics 0,20,100\n"
                    "set key top left\n%s" % (rank_tics(ranks), RANKS_X, yrange([100], len(plots)), plotcmd(plots)))
    plots = ["$a%d using 1:3 lw 2 pt 7 lc rgb '%s' title %s" % (k, COLORS[k], q(label(i))) for k, i in enumerate(impls)]
    f.panels.append("%s\n%s\nset title 'work quanta alternating with test (fig. 6; no target)'\n"
                    "set ylabel 'CPU availability (%% of the call time)'\n%s; set ytics 0,20,100\n"
                    "set key top left\n%s" % (rank_tics(ranks), RANKS_X, yrange([100], len(plots)), plotcmd(plots)))
    n0 = ranks[0]
    t = bars[n0]
    tg = Targets(t.out_path())
    tol = float(tg.search(r"within ([\d.]+)x of W = 0", "1.10"))
    plots, vals = [], [tol]
    for k, impl in enumerate(impls):
        if impl not in t.impls:
            continue
        w0 = t.get(impl, "work_slice_time_w000")
        rows = [[w, t.get(impl, "work_slice_time_w%03d" % w) / w0 if w0 > 0 else None] for w in range(0, 101, 10)]
        vals += col(rows, 1)
        f.add_data("s%d" % k, rows)
        av = t.get(impl, "cpu_avail_work_slice")
        plots.append("$s%d using 1:2 lw 2 pt 7 lc rgb '%s' title %s"
                     % (k, COLORS[k], q("%s: availability %.0f%%" % (label(impl), av))))
    plots.append("%g with lines lw 3 dt 2 lc rgb '%s' title %s" % (tol, TARGET_COLOR,
                                                                    q("tolerance: %.2fx the time at W = 0" % tol)))
    pos = [v for v in vals if v is not None and v > 0]
    log = bool(pos) and max(pos) > 20 * min(pos)      # one impl far off: the others stay readable
    f.panels.append("set title %s\nset xlabel 'work W after the post (%% of the raw ibarrier time)'\n"
                    "set ylabel 'completion time / time at W = 0 (x)'\nset xrange [-5:105]\n%s%s\nset key top left\n%s"
                    % (q("how fig. 7 is measured: %d ranks, medians" % n0), "set logscale y\n" if log else "",
                       yrange(vals, len(plots), log=log), plotcmd(plots)))
    return f


def fig_rendezvous(d, fmt):
    t = Table(os.path.join(d, "p2p.csv"), "p2p")
    f = Figure("03-rendezvous", "Overhead and latency of the rendezvous variants: a ping-pong, rank 0's medians  "
               "[seed 000 figs. 4-5]", (2, 2), (1400, 1000), fmt)
    tg = f.use(t)
    t.need_impl("host")
    sizes = t.suffixes("latency")
    impls = impl_order(t.impls, first=("host",))
    data = []
    for k, impl in enumerate(impls):
        rows = []
        for s in sizes:
            sz = size_label(s)
            isend, irecv = t.opt(impl, "isend_" + sz), t.opt(impl, "irecv_" + sz)
            test, tests = t.opt(impl, "test_" + sz), t.opt(impl, "tests_" + sz)
            lat = t.get(impl, "latency_" + sz)
            ovh = None if None in (isend, irecv, test, tests) else isend + irecv + test * tests
            rows.append([s, isend, irecv, ovh, lat])
        data.append(rows)
        f.add_data("p%d" % k, rows)
    eager = size_bytes(tg.search(r"eager up to (\d+[KMG]?) bytes", "4096"))
    xt = ("%s\nset arrow from %d, graph 0 to %d, graph 1 nohead dt 3 lc rgb '#888888'\n"
          "set label %s at %d, graph 0.03 left offset 0.5,0 font ',8' tc rgb '#666666'"
          % (size_tics(sizes), eager, eager, q("eager limit %s" % size_label(eager)), eager))
    panels = ((2, "isend overhead (fig. 4)", "µs inside one isend"),
              (3, "irecv overhead (fig. 5)", "µs inside one irecv"),
              (4, "overhead a ping: isend + irecv + every test", "µs in rank 0's calls an iteration"),
              (5, "latency (half the round trip)", "latency (µs)"))
    for c, title, ylab in panels:
        plots = ["$p%d using 1:%d lw 2 pt %d lc rgb '%s' title %s" % (k, c, 5 + k, COLORS[k], q(label(i)))
                 for k, i in enumerate(impls)]
        vals = [v for rows in data for v in col(rows, c - 1)]
        kc, kr = key2(len(plots))
        f.panels.append("%s\nset title %s\nset xlabel 'message size (bytes)'\nset ylabel %s\nset logscale y\n%s\n"
                        "%s\n%s" % (xt, q(title), q(ylab), yrange(vals, kr, log=True), kc, plotcmd(plots)))
    f.notes.append("p2p prints no target")
    return f


def fig_rdrp(d, fmt):
    t = Table(os.path.join(d, "rndv.csv"), "rndv")
    f = Figure("04-rdrp-slow-receiver", "Chunked receiver-driven rendezvous (RDRP) vs one get a message, "
               "fast and slow receiver  [seed 004 figs. 5-6]", (2, 2), (1400, 1000), fmt)
    tg = f.use(t)
    t.need_impl("single")
    sizes = t.suffixes("throughput")
    impls = impl_order(t.impls, first=("single",))
    sink = any(m.startswith("sink_throughput_") for (_, m) in t.values)
    sink_mbps = tg.search(r"drains fetched data at (\d+) MB/s")
    data = []
    for k, impl in enumerate(impls):
        rows = []
        for s in sizes:
            sz = size_label(s)
            tp, st = t.get(impl, "throughput_" + sz), t.opt(impl, "sink_throughput_" + sz)
            one = t.get("single", "throughput_" + sz)
            rows.append([s, tp, st, tp / one if one > 0 else None, t.opt(impl, "sink_max_inflight_" + sz)])
        data.append(rows)
        f.add_data("r%d" % k, rows)
    plots = ["$r%d using 1:2 lw 2 pt %d lc rgb '%s' title %s" % (k, 5 + k, COLORS[k], q(label(i)))
             for k, i in enumerate(impls)]
    kc, kr = "set key top left", len(plots)
    f.panels.append("%s\nset title 'throughput, receiver at full speed'\nset xlabel 'message size (bytes)'\n"
                    "set ylabel 'throughput (MB/s, 10^6 bytes/s)'\n%s\n%s\n%s"
                    % (size_tics(sizes), yrange([v for r in data for v in col(r, 1)], kr), kc, plotcmd(plots)))
    if sink:
        plots = ["$r%d using 1:3 lw 2 pt %d lc rgb '%s' title %s" % (k, 5 + k, COLORS[k], q(label(i)))
                 for k, i in enumerate(impls)]
        extra = []
        if sink_mbps:
            plots.append("%s with lines lw 2 dt 3 lc rgb '#555555' title %s"
                         % (sink_mbps, q("the receiver's drain rate, %s MB/s" % sink_mbps)))
            extra.append(float(sink_mbps))
        kc, kr = "set key top left", len(plots)
        f.panels.append("%s\nset title %s\nset xlabel 'message size (bytes)'\n"
                        "set ylabel 'throughput (MB/s, 10^6 bytes/s)'\n%s\n%s\n%s"
                        % (size_tics(sizes), q("slow receiver: rank 1's device drains at %s MB/s" % (sink_mbps or "?")),
                           yrange([v for r in data for v in col(r, 2)], kr, extra=extra), kc, plotcmd(plots)))
    else:
        f.panels.append("set title 'slow receiver'\nunset border; unset tics; unset key\n"
                        "set label 1 'no slow-receiver pass in %s (run rndv with --sink-mbps)' at graph 0.5,0.5 "
                        "center\nplot [0:1][0:1] NaN notitle" % os.path.basename(t.path))
        f.notes.append("rndv.csv has no slow-receiver pass")
    # Seed 004 fig. 5's x axis: the gets in flight (credits c), at the largest size.
    top = size_label(sizes[-1])
    chunked = sorted((int(i.split("/")[1]), i) for i in impls
                     if i.startswith("chunked-") and "/" in i and i.split("/")[1].isdigit())
    rows = [[c, t.get(i, "throughput_" + top), t.opt(i, "sink_throughput_" + top),
             t.opt(i, "sink_max_inflight_" + top)] for c, i in chunked]
    f.add_data("cf", rows)
    one, one_sink = t.get("single", "throughput_" + top), t.opt("single", "sink_throughput_" + top)
    plots = ["$cf using 1:2 lw 2 pt 7 lc rgb '%s' title 'chunked, full-speed receiver'" % COLORS[1],
             "%g with lines lw 2 dt 2 lc rgb '%s' title 'one get, full-speed receiver'" % (one, COLORS[0])]
    vals = col(rows, 1) + [one]
    if sink:
        plots += ["$cf using 1:3 lw 2 pt 5 lc rgb '%s' title 'chunked, slow receiver'" % COLORS[3],
                  "$cf using 1:3:(sprintf('%d in flight', $4)) with labels offset 0,-1 font ',8' notitle",
                  "%g with lines lw 2 dt 4 lc rgb '%s' title 'one get, slow receiver'" % (one_sink or 0, COLORS[2])]
        vals += col(rows, 2) + [one_sink]
    xs = [c for c, _ in chunked] or [1]
    f.panels.append("set logscale x 2; set xtics (%s); set xrange [%g:%g]\nset title %s\n"
                    "set xlabel 'gets in flight at most (c), each of the chunk size'\n"
                    "set ylabel 'throughput (MB/s, 10^6 bytes/s)'\n%s\nset key top left\n%s"
                    % (", ".join("'%d' %d" % (c, c) for c in xs), xs[0] / 1.6, xs[-1] * 1.6,
                       q("%s messages by gets in flight (fig. 5); labels: the most measured" % top),
                       yrange(vals, len(plots) - (1 if sink else 0)), plotcmd(plots)))
    found = tg.find("chunked / single")
    lim = tg.limit("chunked / single")
    lim_from = size_bytes(tg.search(r"chunked / single >= [\d.]+x, sizes >= (\d+[KMG]?)", "1M") or "1M")
    plots = ["$r%d using 1:4 lw 2 pt %d lc rgb '%s' title %s" % (k, 5 + k, COLORS[k], q(label(i)))
             for k, i in enumerate(impls) if i != "single"]
    tline = ""
    if lim is not None:
        tline = ("set arrow from %d,%g to %g,%g nohead lw 3 dt 2 lc rgb '%s' front\n"
                 "set label %s at graph 0.98,first %g right offset 0,-0.9 font ',9' tc rgb '%s' front"
                 % (lim_from, lim, sizes[-1] * 1.6, lim, TARGET_COLOR,
                    q("target >= %gx from %s: %s" % (lim, size_label(lim_from), status_count(found))),
                    lim, TARGET_COLOR))
    vals = [v for r in data[1:] for v in col(r, 3)]
    kc, kr = "set key top left", len(plots)
    f.panels.append("%s\n%s\nset title 'chunked / one get, receiver at full speed'\nset xlabel 'message size (bytes)'\n"
                    "set ylabel 'throughput ratio (x, higher is better)'\n%s\n%s\n%s, "
                    "1 with lines lc rgb '#555555' notitle"
                    % (size_tics(sizes), tline, yrange(vals, kr, extra=[lim or 0]), kc, plotcmd(plots)))
    return f


CONN_PATTERNS = ("ring", "barrier", "allreduce", "alltoall")
HIST = ("set style data histograms; set style histogram clustered gap 1; set style fill solid 0.85 border -1\n"
        "set boxwidth 0.9; set xtics nomirror")


def fig_connections(d, fmt):
    conns = tables(d, "conn", 4)
    ranks = sorted(conns)
    f = Figure("05-connections", "Connections on demand vs a static full mesh: QPs and start-up time  "
               "[seed 002 fig. 5, table 2]", (2, 2), (1400, 1000), fmt)
    for n in ranks:
        conns[n].need_impl("static")
        conns[n].need_impl("on-demand")
        f.use(conns[n])
    big = conns[ranks[-1]]
    pats = [p for p in CONN_PATTERNS if ("static", p + "_qps_max") in big.values]
    if not pats:
        raise DataError("%s: no PATTERN_qps_max results (patterns %s)" % (big.path, ", ".join(CONN_PATTERNS)))
    rows = []
    for p in pats:
        rows.append([p] + [big.get(m, p + "_" + x) for x in ("qps_max", "qps_mean") for m in ("static", "on-demand")]
                    + [big.get(m, p + "_" + x) for x in ("create_ms", "first_ms", "later_ms")
                       for m in ("static", "on-demand")])
    f.add_data("pat", rows)
    f.panels.append("%s\nset title %s\nset xlabel 'communication pattern'\nset ylabel 'QPs a rank (max over ranks)'\n"
                    "%s; set ytics 0,1\nset key top left\n"
                    "plot $pat using 2:xtic(1) lc rgb '%s' title 'static full mesh', "
                    "'' using 3 lc rgb '%s' title 'on demand (a QP at first use)'"
                    % (HIST, q("QPs a rank, %d ranks (table 2)" % big.ranks), yrange(col(rows, 1), 2),
                       COLORS[0], COLORS[1]))
    f.panels.append("%s\nset title %s\nset xlabel 'communication pattern'\n"
                    "set ylabel 'time (ms, the slowest rank)'\n%s\nset key top left\n"
                    "plot $pat using 6:xtic(1) lc rgb '%s' title 'static: create', "
                    "'' using 7 lc rgb '%s' title 'on demand: create', "
                    "'' using 8 lc rgb '#9ecae1' title 'static: first iteration', "
                    "'' using 9 lc rgb '#fc9272' title 'on demand: first iteration (connects)'"
                    % (HIST, q("start-up, %d ranks: create, then the first iteration" % big.ranks),
                       yrange([v for i in (5, 6, 7, 8) for v in col(rows, i)], 4), COLORS[0], COLORS[1]))
    per = []
    for k, mode in enumerate(("static", "on-demand")):
        mrows = []
        for n in ranks:
            t = conns[n]
            ps = [p for p in CONN_PATTERNS if (mode, p + "_create_ms") in t.values]
            if not ps:
                raise DataError("%s: no PATTERN_create_ms results for impl %s" % (t.path, mode))
            cr = [t.get(mode, p + "_create_ms") for p in ps]
            fi = [t.get(mode, p + "_first_ms") for p in ps]
            qp = [t.get(mode, p + "_qps_mean") for p in ps]
            mrows.append([n, sum(cr) / len(cr), sum(c + x for c, x in zip(cr, fi)) / len(cr), sum(qp) / len(qp),
                          max(qp)])
        per.append(mrows)
        f.add_data("m%d" % k, mrows)
    f.panels.append("%s\n%s\nset title 'initialization time vs ranks (fig. 5), mean over the patterns'\n"
                    "set ylabel 'time (ms, the slowest rank)'\n%s\nset key top left\n"
                    "plot $m0 using 1:2 lw 2 pt 7 lc rgb '%s' title 'static: create', "
                    "$m1 using 1:2 lw 2 pt 7 lc rgb '%s' title 'on demand: create', "
                    "$m0 using 1:3 lw 2 dt 2 pt 6 lc rgb '%s' title 'static: create + first iteration', "
                    "$m1 using 1:3 lw 2 dt 2 pt 6 lc rgb '%s' title 'on demand: create + first iteration'"
                    % (rank_tics(ranks), RANKS_X, yrange([v for m in per for i in (1, 2) for v in col(m, i)], 4),
                       COLORS[0], COLORS[1], COLORS[0], COLORS[1]))
    f.panels.append("%s\n%s\nset title 'QPs a rank vs ranks (resource use)'\n"
                    "set ylabel 'QPs a rank (count)'\n%s\nset key top left\n"
                    "plot $m0 using 1:4 lw 2 pt 7 lc rgb '%s' title 'static: mean over the patterns', "
                    "$m1 using 1:4 lw 2 pt 7 lc rgb '%s' title 'on demand: mean over the patterns', "
                    "$m1 using 1:5 lw 2 dt 2 pt 6 lc rgb '%s' title 'on demand: the densest pattern', "
                    "x - 1 with lines dt 3 lc rgb '#555555' title 'N - 1 (every peer)'"
                    % (rank_tics(ranks), RANKS_X, yrange([n - 1 for n in ranks], 4), COLORS[0], COLORS[1], COLORS[1]))
    f.notes.append("conn prints no target")
    return f


def fig_collectives(d, fmt):
    f = Figure("06-collective-overlap", "Overlap and latency per collective: offloaded (MQ) vs host-progressed "
               "(PTP)", (2, 5), (1900, 950), fmt)
    over, lat = [], []
    for c in COLLS:
        two = os.path.join(d, "%s-2.csv" % c)
        if os.path.exists(two):     # the targets are set at 2 ranks
            t = Table(two, c)
        else:
            ts = tables(d, c, 2)
            t = ts[min(ts)]
        t.need_impl("ptp")
        t.need_impl("mq")
        tg = f.use(t)
        sizes = t.suffixes("%s_latency" % c)
        rows = []
        for s in sizes:
            sz = size_label(s)
            pl, ml = t.get("ptp", "%s_latency_%s" % (c, sz)), t.get("mq", "%s_latency_%s" % (c, sz))
            pm, mm = t.get("ptp", "%s_latency_p50_%s" % (c, sz)), t.get("mq", "%s_latency_p50_%s" % (c, sz))
            rows.append([sz, t.get("ptp", "i%s_overlap_%s" % (c, sz)), t.get("mq", "i%s_overlap_%s" % (c, sz)),
                         ml / pl if pl > 0 else None, mm / pm if pm > 0 else None])
        f.add_data("c_" + c, rows)
        marks = []
        for i, s in enumerate(sizes):
            sz = size_label(s)
            pct = [x for x in tg.find("i%s %s overlap >= " % (c, sz), "mq") if x["unit"] == "%"]
            two_x = [x for x in tg.find("i%s %s overlap >= " % (c, sz), "mq") if x["unit"] == "x"]
            if not pct:
                continue
            lim = pct[0]["limit"]
            text = ">= %g%%: %s" % (lim, pct[0]["status"])
            marks.append("set arrow from %g,%g to %g,%g nohead lw 3 lc rgb '%s' front"
                         % (i - 0.45, lim, i + 0.45, lim, TARGET_COLOR))
            if two_x:
                two = two_x[0]["limit"] * t.get("ptp", "i%s_overlap_%s" % (c, sz))
                text += "\n>= %gx PTP: %s" % (two_x[0]["limit"], two_x[0]["status"])
                if 0 < two <= 130:
                    marks.append("set arrow from %g,%g to %g,%g nohead lw 2 dt 2 lc rgb '#ff7f0e' front"
                                 % (i - 0.45, two, i + 0.45, two))
            marks.append("set label %s at %g,graph 0.91 center font ',9' tc rgb '%s' front"
                         % (q(text), i, TARGET_COLOR))
        over.append("%s\n%s\nset title %s\nset xlabel 'bytes a rank'\nset ylabel 'overlap (%%, OSU)'\n"
                    "set yrange [0:135]; set ytics 0,20,100\nset key top left\n"
                    "plot $c_%s using 2:xtic(1) lc rgb '%s' title 'PTP', '' using 3 lc rgb '%s' title 'MQ'"
                    % (HIST, "\n".join(marks), q("i%s, %d ranks" % (c, t.ranks)), c, COLORS[0], COLORS[1]))
        found = [x for x in tg.find("%s " % c, "mq") if " mean <= " in x["what"]]
        tl, extra = "", []
        if found:
            lim = max(x["limit"] for x in found)
            extra.append(lim)
            tl = ("set arrow from graph 0,first %g to graph 1,first %g nohead lw 3 dt 2 lc rgb '%s' front\n"
                  "set label %s at graph 0.03,first %g left offset 0,0.8 font ',9' tc rgb '%s' front"
                  % (lim, lim, TARGET_COLOR, q("target <= %gx: %s" % (lim, status_count(found))), lim, TARGET_COLOR))
        lat.append("%s\n%s\nset title %s\nset xlabel 'bytes a rank'\nset ylabel 'latency MQ / PTP (x)'\n"
                   "set logscale y\n%s\nset key top right\n"
                   "plot $c_%s using 4:xtic(1) lc rgb '%s' title 'mean', '' using 5 lc rgb '#c5b0d5' title 'median', "
                   "1 with lines lc rgb '#555555' notitle"
                   % (HIST, tl, q("%s blocking latency" % c),
                      yrange(col(rows, 3) + col(rows, 4), 2, log=True, extra=extra + [0.5]), c, COLORS[3]))
    f.panels += over + lat
    return f


FIGURES = (
    ("01-barrier-latency", fig_barrier_latency, "barrier and ibarrier latency (mean, median) vs ranks, MQ per "
     "idle policy vs PTP, and MQ/PTP with the spec's and the engine's target lines (seed 003 figs. 4-5)"),
    ("02-cpu-availability", fig_cpu_availability, "CPU availability vs ranks, one work slice (fig. 7, with its "
     "targets) and work quanta with test (fig. 6), and the fig. 7 sweep that yields it (seed 003)"),
    ("03-rendezvous", fig_rendezvous, "isend, irecv and per-ping overhead and latency by message size for the "
     "RTR rendezvous under each progress scheme, chunked, and a host ping-pong (seed 000 figs. 4-5)"),
    ("04-rdrp-slow-receiver", fig_rdrp, "chunked RDRP vs one get: throughput by size at full speed and with a "
     "slow receiver, by gets in flight, and the chunked/single ratio with its target (seed 004)"),
    ("05-connections", fig_connections, "static mesh vs on-demand connections: QPs a rank and start-up time by "
     "pattern and vs ranks (seed 002)"),
    ("06-collective-overlap", fig_collectives, "OSU overlap and MQ/PTP latency of bcast, allreduce, alltoall, "
     "gather and allgather by size, with their targets"),
)
