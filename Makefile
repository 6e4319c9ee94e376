# Flat Makefile: one object per source under $(BUILD)/, automatic header
# dependencies (-MMD), one static library per layer, and sanitizer and
# clang builds (build-asan/, build-clang/) beside the normal one. CFLAGS,
# LDFLAGS and SANITIZE are the caller's to set; the flags the project
# needs are added to them, never replaced.

CC       ?= cc
CFLAGS   ?= -O2 -g
LDFLAGS  ?=
SANITIZE ?=
override CFLAGS  += $(SANITIZE) -std=c11 -Wall -Wextra -D_GNU_SOURCE -I. -MMD -MP
override LDFLAGS += $(SANITIZE)

# The external libraries, in link order, by the layer that needs them:
# libmicrohttpd for server/, jansson for api/ and store/ (safetensors
# headers), OpenBLAS and SLEEF for attention/. Every program is linked
# with all of them after -Wl,--as-needed (LINK_LIBS), so that it records
# only those its objects call: tools/make_models, which uses store/ and
# attention/, does not need libmicrohttpd.
PKGS        := libmicrohttpd jansson openblas sleef
PKG_CFLAGS  := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS    := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
CHECK_LIBS  := $(shell pkg-config --libs check 2>/dev/null)
CURL_LIBS   := $(shell pkg-config --libs libcurl 2>/dev/null)
override CFLAGS += $(PKG_CFLAGS)
LIBS        := $(PKG_LIBS) -lpthread -lm
LINK_LIBS    = -Wl,--as-needed $(LIBS)

# Debian packages the build, the tests and `make run` need.
DEB_PACKAGES := build-essential pkg-config libmicrohttpd-dev libjansson-dev \
                libopenblas-dev libsleef-dev check libcurl4-openssl-dev curl

BUILD ?= build

# $$(call fuzz_objects,$$*) in the fuzz rule.
.SECONDEXPANSION:

# Every .c of a layer's folder is part of it (a new file needs no edit
# here); server/main.c is the server's program, not its library.
ATTN_SRC   := $(wildcard attention/*.c)
STORE_SRC  := $(wildcard store/*.c)
API_SRC    := $(wildcard api/*.c)
SERVER_SRC := $(filter-out server/main.c,$(wildcard server/*.c))
EMBED_SRC  := $(BUILD)/gen/openapi_yaml.c $(BUILD)/gen/web_index_html.c

ATTN_OBJ   := $(ATTN_SRC:%.c=$(BUILD)/%.o)
STORE_OBJ  := $(STORE_SRC:%.c=$(BUILD)/%.o)
API_OBJ    := $(API_SRC:%.c=$(BUILD)/%.o)
SERVER_OBJ := $(SERVER_SRC:%.c=$(BUILD)/%.o) $(EMBED_SRC:%.c=%.o)

# One static library per layer. Programs list them in dependency order
# (server/ calls api/, store/ and attention/; api/ and store/ call
# attention/), and the linker takes from each archive only the members
# that resolve a symbol still undefined: a tool or a test gets the objects
# it calls and what they call, not every module. The test helpers
# (tests/*.c but the suites) are one more, linked before the layers.
SRV_LIB   := $(BUILD)/libsrv.a
API_LIB   := $(BUILD)/libapi.a
STORE_LIB := $(BUILD)/libstore.a
ATTN_LIB  := $(BUILD)/libattn.a
LAYER_LIBS := $(SRV_LIB) $(API_LIB) $(STORE_LIB) $(ATTN_LIB)
TEST_HELPER_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(filter-out tests/test_%.c,$(wildcard tests/*.c)))
TEST_HELPER_LIB := $(BUILD)/libtesthelp.a

SERVER_BIN := $(BUILD)/attention-server
UNIT_TESTS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(wildcard tests/test_*.c))
TOOLS      := $(patsubst tools/%.c,$(BUILD)/tools/%,$(wildcard tools/*.c))
MODELS_DIR   := $(BUILD)/models
MODELS_STAMP := $(MODELS_DIR)/.stamp

.PHONY: all run test check-all test-sanitize test-asan test-valgrind fuzz fuzz-run loadtest deploy-test image image-docker image-podman image-test compose-test kube-test test-ui test-ui-deps screenshots test-clang bench lint format clean deps

# Test objects are intermediate to make; keep them so a rerun links only.
.SECONDARY:

all: $(SERVER_BIN) $(TOOLS) $(MODELS_STAMP)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# The OpenAPI document is served from the binary: embed it as a C array.
$(BUILD)/gen/openapi_yaml.c: api/openapi.yaml tools/embed.sh
	@mkdir -p $(dir $@)
	sh tools/embed.sh api_openapi_yaml < $< > $@

# So is the teaching page (web/README.md), its style sheets and scripts
# copied into it.
WEB_SRC := web/index.html $(wildcard web/*.css web/js/*.js)
$(BUILD)/gen/web_index_html.c: $(WEB_SRC) tools/inline_page.sh tools/embed.sh
	@mkdir -p $(dir $@)
	sh tools/inline_page.sh web/index.html > $(BUILD)/gen/web_index.html
	sh tools/embed.sh web_index_html < $(BUILD)/gen/web_index.html > $@

$(SRV_LIB): $(SERVER_OBJ)
$(API_LIB): $(API_OBJ)
$(STORE_LIB): $(STORE_OBJ)
$(ATTN_LIB): $(ATTN_OBJ)
$(TEST_HELPER_LIB): $(TEST_HELPER_OBJ)
# Written afresh, so that the object of a deleted source leaves with it.
$(LAYER_LIBS) $(TEST_HELPER_LIB):
	@rm -f $@
	$(AR) rcs $@ $^

$(SERVER_BIN): $(BUILD)/server/main.o $(LAYER_LIBS)
	$(CC) $(LDFLAGS) $^ -o $@ $(LINK_LIBS)

# Each tools/<name>.c is a command-line program built as $(BUILD)/tools/<name>.
$(BUILD)/tools/%: $(BUILD)/tools/%.o $(LAYER_LIBS)
	$(CC) $(LDFLAGS) $^ -o $@ $(LINK_LIBS)

# The built-in models (models/README.md), written by tools/make_models into
# $(BUILD)/models; the stamp keeps them until the generator changes.
$(MODELS_STAMP): $(BUILD)/tools/make_models
	$< $(MODELS_DIR)
	@touch $@

# Each tests/test_<module>.c is one check suite, linked with the test
# helpers' library (tests/http_harness.c starts the built server,
# tests/json_edit.c edits requests by path) and the layers' (only the
# members it calls are linked in), plus check and, if it calls it, libcurl.
$(BUILD)/tests/%: $(BUILD)/tests/%.o $(TEST_HELPER_LIB) $(LAYER_LIBS)
	$(CC) $(LDFLAGS) $(if $(filter $*,$(COUNTED_SUITES)),$(ALLOC_WRAP)) $^ -o $@ $(LINK_LIBS) \
	    $(CHECK_LIBS) $(CURL_LIBS)

# Suites that bound the memory a step allocates (tests/alloc_count.h): the
# linker sends their allocator's calls, the layers' included, through its
# counting wrappers.
COUNTED_SUITES := test_oip test_server
ALLOC_WRAP := -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=free \
              -Wl,--wrap=posix_memalign,--wrap=aligned_alloc

# test_store and test_import run the tools' binaries too.
$(BUILD)/tests/test_store: | $(BUILD)/tools/make_models
$(BUILD)/tests/test_import: | $(BUILD)/tools/import_checkpoint

# `run` and `test` install missing packages first, then build in a fresh
# make, so that pkg-config answers for libraries installed a moment ago.
# The ATTN_* environment reaches the server as it is; `run` serves the
# built-in models unless ATTN_MODELS_DIR says otherwise.
run: deps
	+$(MAKE) --no-print-directory all
	ATTN_MODELS_DIR="$${ATTN_MODELS_DIR-$(abspath $(MODELS_DIR))}" exec ./$(SERVER_BIN)

test: deps
	+$(MAKE) --no-print-directory check-all

# The suites run side by side, TEST_JOBS at a time (one a core by default;
# their servers bind port 0 and their files are mkstemp's), the slowest
# first (SLOW_SUITES) so that the rest fill in around them. Each one's
# output goes to $(BUILD)/test-logs/<suite>.log; tests/run_suites.sh
# prints, as each ends, its name, seconds and check's summary line, or
# its whole log if it failed, and at the end "suites: N passed, N failed".
TEST_JOBS   ?= $(shell nproc 2>/dev/null || echo 1)
SLOW_SUITES := test_arrays test_http test_hostile test_float_format test_attention test_models_http
SUITES_IN_ORDER = $(foreach s,$(SLOW_SUITES),$(filter $(BUILD)/tests/$(s),$(UNIT_TESTS))) \
                  $(filter-out $(SLOW_SUITES:%=$(BUILD)/tests/%),$(UNIT_TESTS))
SUITE_ENV = ATTN_SERVER_BIN=$(abspath $(SERVER_BIN)) ATTN_TEST_MODELS_DIR=$(abspath $(MODELS_DIR)) \
            ATTN_TOOLS_DIR=$(abspath $(BUILD)/tools)

check-all: all $(UNIT_TESTS)
	@$(SUITE_ENV) tests/run_suites.sh -j $(TEST_JOBS) -l $(BUILD)/test-logs $(SUITES_IN_ORDER)

# Every test again on one build with clang (build-clang/), under
# AddressSanitizer and UndefinedBehaviorSanitizer (leaks included), its
# warnings as errors: any report or warning fails the run. clang's
# warnings and code generation differ from gcc's. clang 14 does not define
# gcc's __SANITIZE_ADDRESS__, which the suites test to skip what ASan
# cannot do (an address-space limit) and to cut their largest loops: it is
# defined here. This is the sanitizer run of CI; `make test-asan` is the
# same with gcc (build-asan/), and `make test-clang` another name for it.
ASAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined \
              -fno-omit-frame-pointer
SANITIZE_PACKAGES := clang libclang-rt-14-dev
test-sanitize:
	+$(MAKE) --no-print-directory deps DEB_PACKAGES='$(DEB_PACKAGES) $(SANITIZE_PACKAGES)'
	+$(MAKE) --no-print-directory BUILD=build-clang CC=clang CFLAGS='-O1 -g -Werror -D__SANITIZE_ADDRESS__=1' \
	    SANITIZE='$(ASAN_FLAGS)' check-all

test-clang: test-sanitize

test-asan: deps
	+$(MAKE) --no-print-directory BUILD=build-asan CFLAGS='-O1 -g' \
	    SANITIZE='$(ASAN_FLAGS)' check-all

# The suites that start the server, once more with the server under
# valgrind's memcheck (tests/http_harness.c runs it under
# $ATTN_SERVER_WRAPPER): any memory error or definite leak in the server
# fails its exit status and the test. OpenBLAS is kept to AVX2 kernels,
# which valgrind knows; check's timeouts are stretched. test_http runs its
# "shared" case only (every endpoint, the contract's errors, the examples,
# concurrent clients): its "lifecycle" case times heavy computations and
# drains against the clock, which valgrind, 50 times slower and running
# one thread at a time, cannot keep. test_models_http runs its "models"
# case only (listing, named against inline, bad files, SIGHUP reloads,
# files rewritten in place and mapped): its "load" case sends
# gpt2-small-shape requests by the dozen, 1.5 s each under memcheck, 5
# minutes in all; the sanitizer build runs it. The suites run side by
# side as in check-all, each server under its own valgrind.
VALGRIND        := valgrind --quiet --error-exitcode=99 --leak-check=full \
                   --errors-for-leak-kinds=definite --show-leak-kinds=definite
VALGRIND_SUITES := test_http test_access test_models_http test_readme
test-valgrind: deps
	+$(MAKE) --no-print-directory DEB_PACKAGES='valgrind' deps
	+$(MAKE) --no-print-directory all $(VALGRIND_SUITES:%=$(BUILD)/tests/%)
	@$(SUITE_ENV) ATTN_SERVER_WRAPPER='$(VALGRIND)' OPENBLAS_CORETYPE=Haswell CK_TIMEOUT_MULTIPLIER=10 \
	    SUITE_ENV_test_http=CK_RUN_CASE=shared SUITE_ENV_test_models_http=CK_RUN_CASE=models \
	    tests/run_suites.sh -j $(TEST_JOBS) -l $(BUILD)/test-logs-valgrind $(VALGRIND_SUITES:%=$(BUILD)/tests/%)

# libFuzzer targets (tests/fuzz/), built with clang under AddressSanitizer
# and UndefinedBehaviorSanitizer: the request decoder (and the array
# lifting, checked against jansson on every input), the batch and /v2
# decoders, the model loader, and whole HTTP exchanges with the server
# started in the fuzzer's process.
# `make fuzz` first replays the seed corpus (tests/fuzz/corpus/<target>),
# then fuzzes each target for FUZZ_SECONDS; new inputs go to
# build-fuzz/corpus/, never into the source tree. A crash stops the run and
# leaves its input as build-fuzz/crash-*: add it to the seed corpus once
# fixed, so that every later run replays it. Under `make -jN fuzz` the
# targets run N at a time (each fuzzer is one thread, fuzz_http's server
# aside), each one's output printed whole when it ends (--output-sync).
# fuzz_http, last, waits on sockets most of the time (its process, the
# server's threads included, uses under half a core) and runs half of
# FUZZ_SECONDS: it adds half a round to CI's stage, not a third round.
FUZZ_SECONDS ?= 60
FUZZ_SECONDS_http ?= $(shell expr \( $(FUZZ_SECONDS) + 1 \) / 2)
FUZZ_CC      := clang
FUZZ_BUILD   := build-fuzz
FUZZ_FLAGS   := -g -O1 -fsanitize=address,undefined -fno-sanitize-recover=undefined \
                -fno-omit-frame-pointer -std=c11 -D_GNU_SOURCE -I. $(PKG_CFLAGS)
FUZZ_TARGETS := request batch safetensors oip http
FUZZ_SRC_request     := tests/fuzz/fuzz_request.c $(API_SRC) $(ATTN_SRC)
FUZZ_SRC_batch       := tests/fuzz/fuzz_batch.c $(API_SRC) $(ATTN_SRC)
FUZZ_SRC_safetensors := tests/fuzz/fuzz_safetensors.c $(STORE_SRC) $(ATTN_SRC)
FUZZ_SRC_oip         := tests/fuzz/fuzz_oip.c $(API_SRC) $(ATTN_SRC)
FUZZ_SRC_http        := tests/fuzz/fuzz_http.c $(SERVER_SRC) $(EMBED_SRC) $(API_SRC) \
                        $(STORE_SRC) $(ATTN_SRC)

fuzz: deps
	+$(MAKE) --no-print-directory DEB_PACKAGES='clang libclang-rt-14-dev' deps
	+$(MAKE) --no-print-directory fuzz-run

fuzz-run: $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz_%)
	+@$(MAKE) --no-print-directory --output-sync=target $(FUZZ_TARGETS:%=fuzz-run-%)

# One target: the seed corpus, then FUZZ_SECONDS of fuzzing.
fuzz-run-%: $(FUZZ_BUILD)/fuzz_%
	@mkdir -p $(FUZZ_BUILD)/corpus/$*
	@echo "== fuzz_$*: the seed corpus"
	$< -runs=0 tests/fuzz/corpus/$*
	@echo "== fuzz_$*: $(or $(FUZZ_SECONDS_$*),$(FUZZ_SECONDS)) s"
	$< -max_total_time=$(or $(FUZZ_SECONDS_$*),$(FUZZ_SECONDS)) -max_len=8192 -timeout=20 \
	    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=$(FUZZ_BUILD)/ \
	    $(FUZZ_BUILD)/corpus/$* tests/fuzz/corpus/$*

# Each source compiled once (build-fuzz/obj/) for the targets that share it.
$(FUZZ_BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

fuzz_objects = $(patsubst %.c,$(FUZZ_BUILD)/obj/%.o,$(FUZZ_SRC_$(1)))
$(FUZZ_BUILD)/fuzz_%: $$(call fuzz_objects,$$*)
	$(FUZZ_CC) $(FUZZ_FLAGS) -fsanitize=fuzzer $^ -o $@ $(LIBS)

# A bounded load test of the built server on 127.0.0.1 (bench/loadtest.sh,
# about a minute): wrk at 64 and 256 connections with a mix of tiny and
# model requests; fails on socket errors, statuses other than 200 and 503,
# broken bodies or RSS growth over 5 % from 10,000 to 100,000 requests.
loadtest:
	+$(MAKE) --no-print-directory deps DEB_PACKAGES='$(DEB_PACKAGES) wrk'
	+$(MAKE) --no-print-directory all
	bench/loadtest.sh

# deploy/'s manifests checked without kubectl or docker, then real nginx
# with deploy/nginx/nginx.conf in front of two replicas
# (tests/deploy/deploy_test.sh, about 25 s): a checked stream of requests,
# one replica killed in the middle and restarted, X-Request-Id and gzip.
deploy-test:
	+$(MAKE) --no-print-directory deps DEB_PACKAGES='$(DEB_PACKAGES) nginx python3-yaml'
	+$(MAKE) --no-print-directory all
	tests/deploy/deploy_test.sh

# The teaching page in a real browser (tests/ui/, about 40 s): Debian's
# Chromium, headless, driven by the npm package playwright-core (pinned in
# tests/ui/package-lock.json), against the built server on a loopback port.
# A CJK font so that the screenshots in tests/ui/artifacts/ show 我爱你.
# playwright-core needs Node.js 20 or later; Debian 12's own nodejs is 18, so
# an older or missing Node.js stops the target with a message rather than
# running a test tool on a version it does not support.
UI_PACKAGES := chromium fonts-wqy-microhei
test-ui: test-ui-deps
	cd tests/ui && ATTN_SERVER_BIN=$(abspath $(SERVER_BIN)) \
	    ATTN_TEST_MODELS_DIR=$(abspath $(MODELS_DIR)) node --test --test-reporter=spec *.test.mjs

# What test-ui and screenshots need: the packages, Node.js, the build, and
# playwright-core.
test-ui-deps:
	+$(MAKE) --no-print-directory deps DEB_PACKAGES='$(DEB_PACKAGES) $(UI_PACKAGES)'
	@node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)' 2>/dev/null && \
	    command -v npm >/dev/null || { echo "make test-ui needs Node.js 20 or later with npm" \
	    "(found: $$(node --version 2>/dev/null || echo none)); Debian 12's nodejs is 18:" \
	    "install Node.js 20 from NodeSource or nvm" >&2; exit 2; }
	+$(MAKE) --no-print-directory all
	cd tests/ui && npm ci --no-audit --no-fund --loglevel=error

# The README's pictures of the page (tests/ui/screenshots.mjs), from the built
# server in the same Chromium as test-ui: web/screenshot-*.png.
screenshots: test-ui-deps
	cd tests/ui && ATTN_SERVER_BIN=$(abspath $(SERVER_BIN)) \
	    ATTN_TEST_MODELS_DIR=$(abspath $(MODELS_DIR)) node screenshots.mjs

# The image, built from the Dockerfile as a user builds it
# (deploy/README.md): with docker when a Docker engine answers, else with
# podman. The build stage runs `make deps` and `make test`, so a build
# from scratch takes as long as the packages' install and the test suite
# (1.5 minutes more for the base's first debootstrap); on an unchanged
# tree every layer comes from podman's cache (about 3 s). IMAGE_TESTS=0
# passes --build-arg TESTS=0, and the build stage builds without running
# the tests: CI's choice, having run them on the same sources just before.
IMAGE  ?= attention-server:latest
IMAGE_TESTS ?= 1
ENGINE ?= $(shell docker info >/dev/null 2>&1 && echo docker || echo podman)
image:
	+$(MAKE) --no-print-directory image-$(ENGINE)

image-docker:
	docker build --build-arg TESTS=$(IMAGE_TESTS) -t $(IMAGE) .

# podman with tests/deploy/podman/'s configuration, not the user's: runc, no
# raised ulimits, short names resolved in local storage only, where the
# base, localhost/debian:12-slim, is a debootstrap of Debian 12 cached in
# build/image/ (tests/deploy/build_image.sh). The three tests below depend
# on this target, so `make image-test compose-test kube-test` builds once.
PODMAN_PACKAGES := podman runc debootstrap curl python3
image-podman:
	+$(MAKE) --no-print-directory deps DEB_PACKAGES='$(PODMAN_PACKAGES)'
	IMAGE=$(IMAGE) IMAGE_TESTS=$(IMAGE_TESTS) tests/deploy/build_image.sh

# The image run by podman (tests/deploy/image_test.sh, about 5 s after
# the build): uid 10001 on a read-only root, /healthz on a port
# published on 127.0.0.1, the built-in models listed and computing, the
# HEALTHCHECK, a stop on SIGTERM with exit status 0. Needs root.
image-test: image-podman
	IMAGE=$(IMAGE) tests/deploy/image_test.sh

# deploy/compose.yaml brought up by podman-compose (tests/deploy/compose_test.sh,
# about 25 s after the build, 40 s when it first builds its nginx): nginx
# in front of the two replicas, a checked stream of requests while one
# replica is stopped and started again; then torn down. Needs root.
compose-test: image-podman
	+$(MAKE) --no-print-directory deps DEB_PACKAGES='podman-compose python3-yaml'
	IMAGE=$(IMAGE) tests/deploy/compose_test.sh

# deploy/k8s/'s Deployment, Service and ConfigMap played by `podman kube play`
# (tests/deploy/kube_test.sh, about 10 s after the build): the pod ready
# through its readiness probe, serving, stopped with exit status 0;
# then `podman kube down`. The autoscaler and the disruption budget are
# checked by make deploy-test. Needs root.
kube-test: image-podman
	+$(MAKE) --no-print-directory deps DEB_PACKAGES='python3-yaml'
	IMAGE=$(IMAGE) tests/deploy/kube_test.sh

# The benchmarks (bench/README.md, about 5 minutes): the server and its
# models first (the HTTP benchmark runs them), then bench/'s whole suite.
# wrk and /usr/bin/time are the benchmarks' own packages.
bench:
	+$(MAKE) --no-print-directory deps DEB_PACKAGES='$(DEB_PACKAGES) wrk time'
	+$(MAKE) --no-print-directory all
	+$(MAKE) --no-print-directory -C bench

# The C sources against the checked-in .clang-format (clang-format 14,
# Debian 12's): `make lint` names each file whose layout differs, with its
# first difference, and fails; `make format` rewrites them in place.
# Build folders and node_modules are not sources.
CLANG_FORMAT ?= clang-format
FORMAT_SRC    = $(shell find attention api server store tests tools bench \
                    \( -name build -o -name node_modules \) -prune -o \
                    \( -name '*.c' -o -name '*.h' \) -type f -print | sort)
lint:
	+$(MAKE) --no-print-directory deps DEB_PACKAGES='clang-format'
	@out=$$($(CLANG_FORMAT) --dry-run -Werror --ferror-limit=1 $(FORMAT_SRC) 2>&1) && exit 0; \
	printf '%s\n' "$$out" >&2; \
	echo "make lint: $$(printf '%s\n' "$$out" | grep -c clang-format-violations) of" \
	    "$(words $(FORMAT_SRC)) files differ from .clang-format; make format rewrites them" >&2; \
	exit 1

format:
	+$(MAKE) --no-print-directory deps DEB_PACKAGES='clang-format'
	$(CLANG_FORMAT) -i $(FORMAT_SRC)

# Installs the Debian packages that are missing (as root, or through sudo).
deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
	    dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	    echo "installing:$$missing"; \
	    if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	    $$SUDO apt-get update -q && $$SUDO apt-get install -y -q $$missing; \
	fi

clean:
	rm -rf build build-asan build-clang build-fuzz

# build/image/ is a Debian root (make image), whose rc?.d are folders.
-include $(shell find $(BUILD) -path $(BUILD)/image -prune -o -name '*.d' -type f -print 2>/dev/null)
-include $(shell find $(FUZZ_BUILD)/obj -name '*.d' -type f -print 2>/dev/null)
