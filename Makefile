# emunic — build, demo, test.  See README.md.
#   make            libemunic (static + shared), tools, test binaries
#   make deps       install the Debian packages emunic needs (as root)
#   make demo       the main job, over rxe (in the guest when the host has no RDMA)
#   make test       the whole suite (installs, builds, boots the guest, runs pytest)
#   make soak       the two-guest loss soak at full length (50,000 messages at 2% loss)
#   make SAN=1      the same build with ASan + UBSan, in build/san

CC       ?= cc
PYTHON   ?= /usr/bin/python3
SAN      ?=
O        := $(if $(SAN),build/san,build)
# make test's and make demo's builds use every CPU (on 2 cores: 40 s, not 85).
NPROC    := $(shell nproc 2>/dev/null || echo 2)

WARN     := -Wall -Wextra -Werror -Wshadow -Wmissing-prototypes -Wstrict-prototypes \
            -Wpointer-arith -Wformat=2 -Wno-format-nonliteral
CFLAGS   ?= -O2 -g
CFLAGS   += -std=c11 -D_GNU_SOURCE -fPIC $(WARN) -Iinclude -I.
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
ifneq ($(SAN),)
CFLAGS   += $(SANFLAGS) -DEMUNIC_CHECK_RULES
LDFLAGS  += $(SANFLAGS)
endif
# libpmix is opened at run time, under a PMIx launcher only (emunic/boot_pmix.c
# says why): its headers at build time, the build's library path its default.
PMIX_CFLAGS := $(shell pkg-config --cflags pmix 2>/dev/null)
PMIX_LIBDIR := $(shell pkg-config --variable=libdir pmix 2>/dev/null)
CFLAGS   += $(PMIX_CFLAGS)
LDLIBS   := -lrdmacm -lmlx5 -libverbs -luring -ldl -lpthread

LIB_SRCS  := $(sort $(wildcard emunic/*.c emunic/*/*.c shim/*.c shim/*/*.c engines/*/*.c baseline/*.c))
LIB_OBJS  := $(LIB_SRCS:%.c=$(O)/obj/%.o)
# A tool is one file, tools/NAME.c, or a directory of its own, tools/DIR/
# (emunic-DIR: one file a job, and its header).
TOOL_DIRS := bench run info
TOOL_OBJS  = $(patsubst %.c,$(O)/obj/%.o,$(sort $(wildcard tools/$(1)/*.c)))
TOOLS     := $(patsubst tools/%.c,$(O)/bin/%,$(wildcard tools/*.c)) $(TOOL_DIRS:%=$(O)/bin/emunic-%)
TESTBINS  := $(patsubst tests/bin/%.c,$(O)/bin/%,$(wildcard tests/bin/*.c))
# libemunic-mpi.so, the PMPI interposer, and its MPI test programs: where
# Open MPI's headers are (libopenmpi-dev), and not in the sanitizer build
# (an LD_PRELOADed library cannot bring ASan in).
MPI_CFLAGS := $(shell pkg-config --cflags ompi-c 2>/dev/null)
MPI_LIBS   := $(shell pkg-config --libs ompi-c 2>/dev/null)
MPI_OBJS   := $(patsubst %.c,$(O)/obj/%.o,$(sort $(wildcard mpi/*.c)))
MPI_ALL    := $(if $(and $(MPI_CFLAGS),$(if $(SAN),,y)),$(O)/lib/libemunic-mpi.so \
              $(patsubst tests/mpi/%.c,$(O)/bin/%,$(wildcard tests/mpi/*.c)))
# The same interposer and programs for MPICH (libmpich-dev), compiled apart:
# MPICH's handles are integers where Open MPI's are pointers, its constants
# other values, so one binary cannot serve both.
MPICH_CFLAGS := $(shell pkg-config --cflags mpich 2>/dev/null)
MPICH_LIBS   := $(shell pkg-config --libs mpich 2>/dev/null)
MPICH_OBJS   := $(patsubst %.c,$(O)/obj/mpich/%.o,$(sort $(wildcard mpi/*.c)))
MPICH_ALL    := $(if $(and $(MPICH_CFLAGS),$(if $(SAN),,y)),$(O)/lib/libemunic-mpich.so \
                $(patsubst tests/mpi/%.c,$(O)/bin/%.mpich,$(wildcard tests/mpi/*.c)))
HEADERS   := $(wildcard include/*.h include/*/*.h emunic/*.h emunic/*/*.h engines/*/*.h shim/*.h shim/*/*.h \
             shim/*/*/*.h baseline/*.h)
# Programs written against MLNX_OFED's verbs_exp (CORE-Direct style): they see
# shim/verbs_exp's <infiniband/verbs_exp.h> and no emunic header.
LEGACY_CFLAGS = $(filter-out -Iinclude -I.,$(CFLAGS)) -Ishim/verbs_exp

all: $(O)/lib/libemunic.a $(O)/lib/libemunic.so $(TOOLS) $(TESTBINS) $(MPI_ALL) $(MPICH_ALL)

$(O)/obj/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

ifneq ($(PMIX_LIBDIR),)
$(O)/obj/emunic/boot_pmix.o: CFLAGS += -DEMUNIC_PMIX_LIB='"$(PMIX_LIBDIR)/libpmix.so.2"'
endif

$(O)/lib/libemunic.a: $(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(O)/lib/libemunic.so: $(LIB_OBJS)
	@mkdir -p $(dir $@)
	$(CC) -shared $(LDFLAGS) -o $@ $^ $(LDLIBS)

# Binaries link the static library so they run from the tree without LD paths.
$(O)/bin/%: tools/%.c $(O)/lib/libemunic.a $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(O)/lib/libemunic.a $(LDLIBS)

# The tools that are directories: emunic-bench (one file a subcommand),
# emunic-run and emunic-info (one file a job).
$(O)/obj/tools/%.o: tools/%.c $(wildcard tools/*/*.h) $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(O)/bin/emunic-bench: $(call TOOL_OBJS,bench)
$(O)/bin/emunic-run: $(call TOOL_OBJS,run)
$(O)/bin/emunic-info: $(call TOOL_OBJS,info)
$(TOOL_DIRS:%=$(O)/bin/emunic-%): $(O)/lib/libemunic.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(O)/lib/libemunic.a $(LDLIBS)

$(O)/bin/%: tests/bin/%.c tests/bin/harness.h tests/bin/pattern.h $(O)/lib/libemunic.a $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(O)/lib/libemunic.a $(LDLIBS)

# A CORE-Direct program ported to shim/verbs_exp (see LEGACY_CFLAGS).
$(O)/bin/emunic-exp-barrier: tests/bin/emunic-exp-barrier.c $(O)/lib/libemunic.a $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(LEGACY_CFLAGS) $(LDFLAGS) -o $@ $< $(O)/lib/libemunic.a $(LDLIBS)

$(O)/obj/mpi/%.o: mpi/%.c mpi/mpi_int.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(MPI_CFLAGS) -c $< -o $@

$(O)/lib/libemunic-mpi.so: $(MPI_OBJS) $(LIB_OBJS) mpi/exports.map
	@mkdir -p $(dir $@)
	$(CC) -shared $(LDFLAGS) -Wl,--version-script=mpi/exports.map -o $@ $(MPI_OBJS) $(LIB_OBJS) \
		$(LDLIBS) $(MPI_LIBS)

# MPI test programs: plain MPI, no emunic (the interposer brings it).
$(O)/bin/%: tests/mpi/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(MPI_CFLAGS) $(LDFLAGS) -o $@ $< $(MPI_LIBS)

$(O)/obj/mpich/mpi/%.o: mpi/%.c mpi/mpi_int.h $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(MPICH_CFLAGS) -c $< -o $@

$(O)/lib/libemunic-mpich.so: $(MPICH_OBJS) $(LIB_OBJS) mpi/exports.map
	@mkdir -p $(dir $@)
	$(CC) -shared $(LDFLAGS) -Wl,--version-script=mpi/exports.map -o $@ $(MPICH_OBJS) $(LIB_OBJS) \
		$(LDLIBS) $(MPICH_LIBS)

# MPICH's MPI_STATUSES_IGNORE is (MPI_Status *)1: gcc 12 takes it for a
# zero-size region its Waitall writes (a false -Wstringop-overflow).
$(O)/bin/%.mpich: tests/mpi/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Wno-stringop-overflow $(MPICH_CFLAGS) $(LDFLAGS) -o $@ $< $(MPICH_LIBS)

# Every public header compiles on its own.
hdrcheck: $(patsubst include/%.h,$(O)/hdrcheck/%.o,$(wildcard include/*.h include/*/*.h))
$(O)/hdrcheck/%.o: include/%.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -x c -c $< -o $@

deps:
	@scripts/deps.sh

guest:
	@guest-images/build.sh build/guest

demo: deps
	@$(MAKE) --no-print-directory -j$(NPROC) all
	@scripts/on-rxe.sh scripts/demo.sh

test: deps
	@$(MAKE) --no-print-directory -j$(NPROC) all hdrcheck
	@$(MAKE) --no-print-directory -j$(NPROC) SAN=1 all
	@$(PYTHON) -m pytest -q --durations=25 $(sort $(wildcard tests/test_*.py)) tests/soak $(PYTEST_ARGS)

# Pictures shaped like the seed papers' figures (plots/): one short benchmark
# run over rxe (in the guest when this host has no RDMA; ~100 s of benchmarks
# under TCG) into build/plots/csv, then build/plots/*.png drawn here with
# gnuplot.  PLOTS_CSV=DIR draws from an earlier run (no benchmark);
# PLOTS_FORMAT=svg draws SVG.
plots: deps
	@$(if $(PLOTS_CSV),,$(MAKE) --no-print-directory all)
	@PYTHON=$(PYTHON) plots/plots.sh

# The loss soak between two guests (tests/soak) at full length: 50,000
# messages at 2% loss (`make test` runs 4,000, last, after the two-guest tests).
soak: deps
	@$(MAKE) --no-print-directory all
	@EMUNIC_SOAK_ROUNDS=250 $(PYTHON) -m pytest -q tests/soak $(PYTEST_ARGS)

clean:
	rm -rf build/obj build/lib build/bin build/san build/hdrcheck

.PHONY: all deps guest demo test soak plots clean hdrcheck
.DELETE_ON_ERROR:
