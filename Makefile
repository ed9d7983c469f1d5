# leakref — top-level build. `make help` lists targets.
SHELL      := /bin/bash
PREFIX     ?= /usr/local
BUILD      ?= build
CXX        ?= g++
CC         ?= gcc
OPT        ?= -O2
SAN        ?=
CXXFLAGS   ?= $(OPT) -g
CXXFLAGS   += -std=c++20 -Wall -Wextra -Werror -fPIC -Icorelib/include $(SAN)
LDLIBS     := -ldw -lelf -ldebuginfod -lfmt $(SAN)

CORE_SRC   := $(wildcard corelib/src/*.cpp)
CORE_OBJ   := $(CORE_SRC:%.cpp=$(BUILD)/%.o)
CLI_SRC    := $(wildcard cli/*.cpp)
CLI_OBJ    := $(CLI_SRC:%.cpp=$(BUILD)/%.o)
TEST_SRC   := $(wildcard tests/*.cpp)
TEST_OBJ   := $(TEST_SRC:%.cpp=$(BUILD)/%.o)
LIB        := $(BUILD)/libleakref.a
BIN        := $(BUILD)/leakref
TESTBIN    := $(BUILD)/leakref-tests

.PHONY: all lib test test-sanitize fuzz bench demo install clean deps help fixtures format check-format

all: $(BIN) fixtures

lib: $(LIB)

$(BUILD)/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -MMD -MP -c $< -o $@

$(LIB): $(CORE_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BIN): $(CLI_OBJ) $(LIB)
	$(CXX) $(CXXFLAGS) -o $@ $(CLI_OBJ) $(LIB) $(LDLIBS)

-include $(CORE_OBJ:.o=.d) $(CLI_OBJ:.o=.d) $(TEST_OBJ:.o=.d)

include fixtures/fixtures.mk

clean:
	rm -rf $(BUILD) build-san build-fuzz

# ---- tests ---------------------------------------------------------------
TEST_CXXFLAGS = $(CXXFLAGS) -DLR_BUILD_DIR='"$(abspath $(BUILD))"' -Itests

$(BUILD)/tests/%.o: tests/%.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(TEST_CXXFLAGS) -MMD -MP -c $< -o $@

$(TESTBIN): $(TEST_OBJ) $(LIB)
	$(CXX) $(CXXFLAGS) -o $@ $(TEST_OBJ) $(LIB) $(LDLIBS)

test: $(BIN) fixtures $(TESTBIN)
	$(TESTBIN) $(TEST_ARGS)
