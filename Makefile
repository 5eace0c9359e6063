# Makefile for dlock (PGXS)
#
#   make && make install        build and install into the pg_config in PATH
#   make installcheck           pg_regress, isolation and TAP tests against PGHOST/PGPORT
#
# The supported way to run everything is scripts/test.sh (see README.md): it
# installs what is missing, starts a throwaway cluster as an unprivileged user
# and runs all three suites.

EXTENSION = dlock dlock_proxy
MODULE_big = dlock
# Every src/*.c and src/FAMILY/*.c is part of the module: a new file needs
# no line here.
OBJS = $(patsubst $(srcdir)/%.c,%.o,$(sort $(wildcard $(srcdir)/src/*.c $(srcdir)/src/*/*.c)))

# every install and upgrade script of both extensions
DATA = $(sort $(notdir $(wildcard $(srcdir)/dlock--*.sql $(srcdir)/dlock_proxy--*.sql)))
PGFILEDESC = "dlock - lease locks with fencing tokens"

# pg_regress tests: every sql/NAME.sql, run against expected/NAME.out in
# name order, except idle_sweep first (it counts rows of a fresh database) and
# upgrade last (it drops and re-creates the extension).  Isolation specs:
# every specs/NAME.spec, in name order.  A new test needs no line here.
REGRESS_FIRST = idle_sweep
REGRESS_LAST = upgrade
REGRESS = $(REGRESS_FIRST) \
	$(filter-out $(REGRESS_FIRST) $(REGRESS_LAST),$(sort $(basename $(notdir $(wildcard $(srcdir)/sql/*.sql))))) \
	$(REGRESS_LAST)
REGRESS_OPTS = --load-extension=dlock

ISOLATION = $(sort $(basename $(notdir $(wildcard $(srcdir)/specs/*.spec))))
ISOLATION_OPTS = --load-extension=dlock

TAP_TESTS = 1

PG_CPPFLAGS = -I$(srcdir)/src
SHLIB_LINK =

EXTRA_CLEAN = results regression.diffs regression.out tmp_check tmp_check_iso output_iso log cli/dlock

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXS tracks header dependencies only in servers built with
# --enable-depend: rebuild every object when a header changes (a struct
# laid out one way in one file and another way in the next is a crash).
$(OBJS): $(wildcard $(srcdir)/src/*.h $(srcdir)/src/*/*.h)

# make dist: the release zip for PGXN (dlock-VERSION.zip), from the
# committed tree (git archive), with META.json at its top.
DIST_VERSION = $(shell sed -nE 's/^ *"version": "([0-9.]+)".*/\1/p' META.json | head -n 1)
dist:
	git archive --format zip --prefix=dlock-$(DIST_VERSION)/ -o dlock-$(DIST_VERSION).zip HEAD
.PHONY: dist

# The dlock command line (cli/): a libpq program, installed next to
# pg_config --bindir, with its man page under pg_config's mandir.  Those
# may be off PATH and MANPATH (Debian: /usr/lib/postgresql/NN/bin); to put
# the two elsewhere, e.g.
#   make install-cli CLI_BINDIR=/usr/local/bin CLI_MANDIR=/usr/local/share/man
# Its version (dlock --version) is META.json's.
CLI_SRCS = $(sort $(wildcard cli/*.c))
CLI_BINDIR = $(bindir)
CLI_MANDIR = $(mandir)
all: cli/dlock
cli/dlock: $(CLI_SRCS) cli/dlock_cli.h META.json
	$(CC) $(CFLAGS) -Wall -Wextra -Wno-unused-parameter -I$(includedir) \
		-DDLOCK_VERSION='"$(DIST_VERSION)"' $(CLI_SRCS) \
		-L$(libdir) $(LDFLAGS_EX) -lpq -o $@
install: install-cli
install-cli: cli/dlock
	$(MKDIR_P) '$(DESTDIR)$(CLI_BINDIR)' '$(DESTDIR)$(CLI_MANDIR)/man1'
	$(INSTALL_PROGRAM) cli/dlock '$(DESTDIR)$(CLI_BINDIR)/dlock'
	$(INSTALL_DATA) $(srcdir)/cli/dlock.1 '$(DESTDIR)$(CLI_MANDIR)/man1/dlock.1'
	@echo 'dlock: installed $(DESTDIR)$(CLI_BINDIR)/dlock and $(DESTDIR)$(CLI_MANDIR)/man1/dlock.1'
.PHONY: install-cli
