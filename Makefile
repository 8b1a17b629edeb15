# lua-ibverbs
#   make              build build/lua5.4/ibverbs/core.so
#   make LUA=luajit   build build/luajit/ibverbs/core.so
#   make deps         everything the project needs: the Debian packages, the VM's kernel and
#                     the Debian 11 trees (make demo takes the first two, make portable
#                     the trees too; make test makes them beside its first VM)
#   make test         build, host specs, device specs in the soft-RoCE VM, luacheck
#   make check-ffi    ibverbs.ffi's declarations against the C headers (generated C test)
#   make demo         show rxe0 from inside the soft-RoCE VM
#   make bench        Lua against C on rxe0: bench/run (post_poll), bench/run-ffi (LuaJIT FFI)
#   make bench-ir     instructions per WR under callgrind: C, Lua 5.4, LuaJIT, LuaJIT FFI, pyverbs
#   make bench-fabric fabric_matrix at scale: dry runs of 64 to 2048 local ranks, tournament, shift
#                     and serial on four soft-RoCE VMs (one boot)
#   make bench-fault-sim  the fabric's localization at 12,500 nodes x 8 rails, faults planted (bench/run-fault-sim)
#   make doc          the API reference (LDoc, from docs/api/*.lua) in build/doc/index.html
#   make test-nodes4  fabric_matrix's verdict scenarios on four soft-RoCE VMs alone (a step of make test)
#   make test-clos    the routed Clos of four soft-RoCE VMs and a router VM, its fault campaign (not yet a step of make test)
#   make spec SPEC=spec/device/verbs/qp_spec.lua [LUA=luajit] [SAN=address,undefined]
#                     one spec file: host specs here, the others in the soft-RoCE VM
#   make fuzz         the adversarial fuzzer soak in the soft-RoCE VM (FUZZ_ARGS=... for more)
#   make soak         the fault loops (flush, link flaps, killed peers) for SOAK_SECONDS (300) in the VM
#   make LUA=lua5.3   build build/lua5.3/ibverbs/core.so (Lua 5.3; also LUA=luajit)
#   make portable     build/portable/ibvlua and ibvluajit, built in a Debian 11 tree
#                     (tools/bullseye): glibc 2.28 or later, any rdma-core from 28
#   make install      ibvlua, the module, the Lua files, the embedding header and library
#                     under $(DESTDIR)$(PREFIX) (PREFIX=/usr/local); PORTABLE=1 installs
#                     the portable hosts as ibvlua and ibvluajit instead of this build's
#   make embed        examples/embed: a C program lending its QPs to a Lua script
LUA ?= lua5.4
PKG_LUA_lua5.4 = lua5.4
PKG_LUA_lua5.3 = lua5.3
PKG_LUA_luajit = luajit
PKG_LUA = $(PKG_LUA_$(LUA))
ifeq ($(PKG_LUA),)
$(error LUA must be lua5.4, lua5.3 or luajit)
endif

CC ?= cc
CFLAGS ?= -O2 -g
WARN = -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wshadow -Wmissing-prototypes -Werror
# Deferred and then cached: `make demo` installs pkg-config and the -dev packages
# (its `deps` prerequisite) before the first compile asks for these, so they
# must not be read when the Makefile is parsed.
PKG_CFLAGS = $(eval PKG_CFLAGS := $$(shell pkg-config --cflags $(PKG_LUA) libibverbs librdmacm))$(PKG_CFLAGS)
PKG_LIBS = $(eval PKG_LIBS := $$(shell pkg-config --libs libibverbs librdmacm))$(PKG_LIBS)
LIBS = $(PKG_LIBS) -ldl -pthread
# RDMA_CFLAGS=-I<dir>: other rdma-core headers than the system's (make portable)
RDMA_CFLAGS ?=
SAN ?=
ifneq ($(SAN),)
CFLAGS += -fsanitize=$(SAN) -fno-omit-frame-pointer -O1
LIBS += -fsanitize=$(SAN)
endif

BUILD = build/$(LUA)$(if $(SAN),-san)
# csrc/ in folders by layer (docs/architecture.md); objects mirror them under obj/
SRCS = $(sort $(shell find csrc -name '*.c'))
HDRS = $(sort $(shell find csrc -name '*.h'))
OBJS = $(SRCS:csrc/%.c=$(BUILD)/obj/%.o)
MODULE = $(BUILD)/ibverbs/core.so
ARCHIVE = $(BUILD)/libibverbs-lua.a
HOST = $(BUILD)/ibvlua
EMBED = $(BUILD)/embed

all: $(MODULE) $(HOST)

# what the installed rdma-core headers provide (tools/configure: compile probes)
CONFIG_H = $(BUILD)/gen/ibvl_config.h
$(CONFIG_H): tools/configure
	@mkdir -p $(dir $@)
	CC="$(CC)" IBVL_PC_VERSION="$(RDMA_CORE_VERSION)" tools/configure $@ $(RDMA_CFLAGS) $(PKG_CFLAGS)

# The module's own calls bind inside it (no interposition: no PLT on the
# kernels' hot paths, and a function of one file may be inlined there); the
# symbols it exports stay as they are.  Includes name their folder
# ("base/err.h"), from -Icsrc.
$(BUILD)/obj/%.o: csrc/%.c $(HDRS) $(CONFIG_H)
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) -fPIC -fno-semantic-interposition $(RDMA_CFLAGS) $(PKG_CFLAGS) -Icsrc -I$(BUILD)/gen -c $< -o $@

$(MODULE): $(OBJS)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-Bsymbolic-functions -o $@ $(OBJS) $(LIBS)

# ibvlua, the scripting host: the interpreter linked statically (the whole
# archive, exported with -Wl,-E for system C modules), ibverbs.core and every
# Lua module of lua/ built in (tools/embed-lua.lua); rdma-core stays dynamic.
# libibverbs-lua.a: the module, the embedded Lua files and the embedding API.
LIBLUA_A_lua5.4 = liblua5.4.a
LIBLUA_A_lua5.3 = liblua5.3.a
LIBLUA_A_luajit = libluajit-5.1.a
LIBLUA_A = $(eval LIBLUA_A := $$(shell pkg-config --variable=libdir $(PKG_LUA))/$(LIBLUA_A_$(LUA)))$(LIBLUA_A)
RDMA_CORE_VERSION = $(eval RDMA_CORE_VERSION := $$(shell pkg-config --modversion libibverbs))$(RDMA_CORE_VERSION)
LUA_SRCS = $(sort $(shell find lua -name '*.lua'))

# and the pure-Lua libraries the tools use (argparse, dkjson: MIT), when the
# build machine has them: on this Lua's path, else in any /usr/share/lua/5.x
# (Debian 11 installs both under 5.1 to 5.3 only), so the tools run on a node
# with no Lua at all
LUA_DEPS = $(eval LUA_DEPS := $$(shell $(LUA) -e 'for _, m in ipairs{"argparse", "dkjson"} do \
	local p = package.searchpath(m, package.path .. ";/usr/share/lua/5.4/?.lua;/usr/share/lua/5.3/?.lua;" .. \
	"/usr/share/lua/5.2/?.lua;/usr/share/lua/5.1/?.lua") if p then io.write(m, "=", p, " ") end end'))$(LUA_DEPS)

# SOCKET_SRC=<luasocket's src/> (make portable): luasocket's C core and
# socket.lua built in as socket.core and socket, for nodes with no luasocket
# this Lua can load; unset, `require "socket"` finds the system's luasocket
SOCKET_SRC ?=
SOCKET_C = luasocket timeout buffer io auxiliar compat options inet usocket except select tcp udp
SOCKET_OBJS = $(if $(SOCKET_SRC),$(SOCKET_C:%=$(BUILD)/obj/luasocket/%.o))
SOCKET_MODS = $(if $(SOCKET_SRC),socket=$(SOCKET_SRC)/socket.lua socket.core=@luaopen_socket_core)
$(BUILD)/obj/luasocket/%.o: $(SOCKET_SRC)/%.c
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) -fPIC $(PKG_CFLAGS) -c $< -o $@

$(BUILD)/gen/lua_modules.c: tools/embed-lua.lua $(LUA_SRCS) $(if $(SOCKET_SRC),$(SOCKET_SRC)/socket.lua)
	@mkdir -p $(dir $@)
	$(LUA) tools/embed-lua.lua $@ $(LUA_SRCS) $(LUA_DEPS) $(SOCKET_MODS)

$(BUILD)/obj/lua_modules.o: $(BUILD)/gen/lua_modules.c csrc/ibverbs.h
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) -fPIC $(RDMA_CFLAGS) $(PKG_CFLAGS) -Icsrc -c $< -o $@

$(ARCHIVE): $(OBJS) $(BUILD)/obj/lua_modules.o $(SOCKET_OBJS)
	rm -f $@
	ar rcs $@ $^

# the host's own files: ibvlua.c (options, chunks, tools, main), repl.c (the prompt)
HOST_OBJS = $(BUILD)/obj/host/ibvlua.o $(BUILD)/obj/host/repl.o
$(BUILD)/obj/host/%.o: host/%.c host/ibvlua.h csrc/ibverbs.h $(CONFIG_H)
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) $(RDMA_CFLAGS) $(PKG_CFLAGS) -Icsrc -I$(BUILD)/gen -c $< -o $@

# PIN_MATH=1 (make portable): the static Lua library's exp, log, log2, pow
# and exp2 at glibc's first versions (host/pinmath.c), for glibc before 2.29
PIN_MATH ?=
PIN_OBJ = $(if $(PIN_MATH),$(BUILD)/obj/pinmath.o)
PIN_WRAP = -Wl,--wrap=exp,--wrap=log,--wrap=log2,--wrap=exp2,--wrap=pow
PIN_LDFLAGS = $(if $(PIN_MATH),$(PIN_WRAP))
$(BUILD)/obj/pinmath.o: host/pinmath.c
	@mkdir -p $(dir $@)
	$(CC) $(WARN) $(CFLAGS) -c $< -o $@

$(HOST): $(HOST_OBJS) $(ARCHIVE) $(PIN_OBJ)
	$(CC) -o $@ $(HOST_OBJS) $(PIN_OBJ) $(PIN_LDFLAGS) -Wl,-E -Wl,--whole-archive $(ARCHIVE) $(LIBLUA_A) \
		-Wl,--no-whole-archive $(LIBS) -lm -static-libgcc

$(EMBED): examples/embed/embed.c $(ARCHIVE)
	$(CC) $(WARN) $(CFLAGS) $(PKG_CFLAGS) -Icsrc -o $@ $< $(ARCHIVE) $(LIBLUA_A) $(LIBS) -lm -ldl

$(BUILD)/embed-lifetime: spec/embed/lifetime.c $(ARCHIVE)
	$(CC) $(WARN) $(CFLAGS) $(PKG_CFLAGS) -Icsrc -o $@ $< $(ARCHIVE) $(LIBLUA_A) $(LIBS) -lm -ldl

embed: $(EMBED) $(BUILD)/embed-lifetime

PREFIX ?= /usr/local
LUA_V_lua5.4 = 5.4
LUA_V_lua5.3 = 5.3
LUA_V_luajit = 5.1
HOST_NAME_lua5.4 = ibvlua
HOST_NAME_lua5.3 = ibvlua5.3
HOST_NAME_luajit = ibvluajit
install: all $(ARCHIVE)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/include/lua-ibverbs \
		$(DESTDIR)$(PREFIX)/lib/lua/$(LUA_V_$(LUA))/ibverbs \
		$(DESTDIR)$(PREFIX)/share/lua/$(LUA_V_$(LUA))/ibverbs
	install -s -m 755 $(if $(PORTABLE),build/portable/$(HOST_NAME_$(LUA)),$(HOST)) \
		$(DESTDIR)$(PREFIX)/bin/$(HOST_NAME_$(LUA))
	install -m 644 csrc/ibverbs.h $(DESTDIR)$(PREFIX)/include/lua-ibverbs/ibverbs.h
	install -m 644 $(ARCHIVE) $(DESTDIR)$(PREFIX)/lib/libibverbs-lua$(if $(filter luajit,$(LUA)),jit).a
	install -m 755 $(MODULE) $(DESTDIR)$(PREFIX)/lib/lua/$(LUA_V_$(LUA))/ibverbs/core.so
	cd lua && for f in $$(find . -name '*.lua'); do \
		install -D -m 644 $$f $(DESTDIR)$(PREFIX)/share/lua/$(LUA_V_$(LUA))/$$f; done

# LuaRocks' build (rockspec/, type "make"): the module alone, with the flags
# and directories LuaRocks found; rock-install copies it and the Lua modules
rock:
	$(MAKE) LUA=lua5.4 BUILD=build/rock CC="$(CC)" CFLAGS="$(CFLAGS)" \
		PKG_CFLAGS="-I$(LUA_INCDIR) -I$(IBVERBS_INCDIR) -I$(RDMACM_INCDIR)" \
		PKG_LIBS="-L$(IBVERBS_LIBDIR) -L$(RDMACM_LIBDIR) -libverbs -lrdmacm" build/rock/ibverbs/core.so

rock-install:
	install -d $(INST_LIBDIR)/ibverbs
	install -m 755 build/rock/ibverbs/core.so $(INST_LIBDIR)/ibverbs/core.so
	cd lua && for f in $$(find . -name '*.lua'); do install -D -m 644 $$f $(INST_LUADIR)/$$f; done

# what a script needs to find the module from the source tree
ENV = LUA_PATH="lua/?.lua;lua/?/init.lua;spec/?.lua;$$LUA_PATH;;" \
      LUA_CPATH="$(BUILD)/?.so;$$LUA_CPATH;;"

DEB_PACKAGES = liblua5.4-dev lua5.4 luajit libluajit-5.1-dev libibverbs-dev librdmacm-dev \
	ibverbs-providers rdma-core ibverbs-utils rdmacm-utils perftest lua-busted lua-socket \
	lua-check lua-luv qemu-system-x86 busybox-static cpio kmod iproute2 pkg-config gcc make \
	valgrind gzip luarocks liblua5.1-0-dev lua-argparse lua-dkjson lua-ldoc lua-markdown \
	openmpi-bin gnuplot-nox graphviz python3 python3-pyverbs libreadline8 \
	slurm-wlm munge libpmix-dev liblua5.3-dev lua5.3 debootstrap binutils
# make deps: all of it.  Each part on its own, for the targets that need it:
# packages (the Debian packages, when missing), kernel (the kernel and initramfs
# tools/rxe-vm boots, cached under .cache/rxe-vm) and bullseye (the Debian 11
# trees: tools/bullseye --prepare, debootstrap and its build packages, and
# --prepare-bare, the bare node; minutes once, cached under .cache/bullseye and
# .cache/bullseye-bare).  make demo takes packages and kernel only; make
# portable takes bullseye too; make test (tools/run-tests) makes the trees
# beside its first VM, so a fresh clone's `make demo; make test` (.ci/run)
# makes them while the device specs run.
deps: packages kernel bullseye

packages:
	@missing=$$(for p in $(DEB_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | \
		grep -q 'install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		echo "installing:" $$missing; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends $$missing; \
	else echo "all Debian packages present"; fi

kernel: packages
	tools/rxe-vm --prepare

bullseye: packages
	@mkdir -p .cache
	tools/bullseye --prepare
	tools/bullseye --prepare-bare

# the portable hosts: built in the Debian 11 tree (the bullseye target makes it) with
# argparse, dkjson and luasocket (its source, which the bullseye target fetches) built
# in, then their symbol versions checked against the floors
portable: bullseye
	tools/bullseye build
	tools/check-floors --glibc 2.28 build/portable/ibvlua build/portable/ibvluajit

# the three builds on both cores; tools/run-tests makes the Debian 11 trees
# (once: minutes of debootstrap on a fresh machine) beside the first VM, and
# what needs them waits for them
test:
	$(MAKE) -j2 all embed
	$(MAKE) -j2 LUA=luajit all embed
	$(MAKE) -j2 SAN=address,undefined all embed
	tools/run-tests

# one spec file, where it belongs: spec/host/ on this machine, every other
# directory (device, faults) inside the soft-RoCE VM; SAN= runs it under the
# ASan/UBSan build with libasan preloaded, as the fuzzer's "san" runs do
SPEC_RUN = $(if $(filter spec/host/%,$(SPEC)),host,$(if $(filter spec/nodes/%,$(SPEC)),nodes,device))
SPEC_ENV = $(ENV)$(if $(SAN), ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 LD_PRELOAD=$$($(CC) -print-file-name=libasan.so))
spec: all
	@test -n "$(SPEC)" || { echo "usage: make spec SPEC=spec/device/verbs/qp_spec.lua" >&2; exit 2; }
	@test -f "$(SPEC)" || { echo "make spec: no such file: $(SPEC)" >&2; exit 2; }
ifeq ($(SPEC_RUN),host)
	$(SPEC_ENV) $(LUA) /usr/bin/busted --run=host $(SPEC)
else ifeq ($(SPEC_RUN),nodes)
	tools/rxe-vm --nodes 2 --timeout 600 env $(SPEC_ENV) $(LUA) /usr/bin/busted --run=nodes $(SPEC)
else
	tools/rxe-vm --timeout 900 env $(SPEC_ENV) $(LUA) /usr/bin/busted --run=device $(SPEC)
endif

# fabric_matrix's rounds and verdicts on four soft-RoCE VMs (spec/nodes4):
# healthy, a slow node, a slow link, a killed rank; make test runs them too
test-nodes4: all
	tools/rxe-vm --nodes 4 --timeout 600 env $(ENV) $(LUA) /usr/bin/busted --run=nodes4 -o utfTerminal

# the routed Clos (tools/rxe-vm --clos, spec/clos): the switches themselves,
# then faults inside the fabric (not yet in make test: run by hand)
test-clos: all
	tools/rxe-vm --clos --timeout 400 env $(ENV) $(LUA) /usr/bin/busted --run=clos -o utfTerminal

check-host: all
	$(ENV) $(LUA) /usr/bin/busted --run=host

# tools/ffi-layout.lua writes a C program from lua/ibverbs/ffi.lua's cdef
FFI_LAYOUT = build/ffi-layout
check-ffi:
	$(MAKE) LUA=luajit all
	LUA_PATH="lua/?.lua;;" LUA_CPATH="build/luajit/?.so;;" luajit tools/ffi-layout.lua > $(FFI_LAYOUT).c
	$(CC) $(WARN) $(CFLAGS) $(shell pkg-config --cflags libibverbs) $(FFI_LAYOUT).c -o $(FFI_LAYOUT)
	$(FFI_LAYOUT)

# only what the demo needs: the packages, the VM's kernel, the module and ibvlua
demo: packages kernel all
	tools/rxe-vm env $(ENV) $(LUA) examples/demo.lua

bench: all
	bench/run $(BENCH_ARGS)
	bench/run-ffi ffi_post_poll

# not part of make test: callgrind under the emulated CPU takes minutes
bench-ir: all
	bench/run-ir

# not part of make test: thousands of local processes, then four VMs
bench-fabric: all
	bench/fabric

# not part of make test: the fabric's localization at scale, simulated (tens of minutes on 2 cores)
bench-fault-sim:
	bench/run-fault-sim

# generated, not committed: build/ is the build output
doc:
	ldoc -c docs/config.ld .

# a longer soak than the bounded run in `make test`: lua5.4, luajit and the
# ASan/UBSan build, several seeds each; reproducers go to .cache/fuzz
FUZZ_ARGS ?= --seeds 1-6 --interp lua5.4,luajit,san --calls 20000 --time 60 --minimize 20
fuzz: all
	$(MAKE) LUA=luajit all
	$(MAKE) SAN=address,undefined all
	tools/rxe-vm --timeout 3000 lua5.4 tools/fuzz.lua $(FUZZ_ARGS)

# the fault loops for minutes, with exactly-once counts
SOAK_SECONDS ?= 300
soak: all
	tools/rxe-vm --timeout $$(($(SOAK_SECONDS) + 600)) env $(ENV) $(LUA) tools/soak.lua $(SOAK_SECONDS)

lint:
	luacheck -q lua spec examples $(wildcard bench/*.lua tools/*.lua)

clean:
	rm -rf build

.PHONY: portable rock rock-install all embed install deps packages kernel bullseye test test-nodes4 test-clos spec check-host check-ffi bench bench-ir bench-fabric bench-fault-sim demo doc fuzz soak lint clean
