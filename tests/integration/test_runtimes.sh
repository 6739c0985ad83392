#!/usr/bin/env bash
# Runtimes with generated code whose stack walkers read the return addresses
# of the C++ frames that code calls (issue 27): V8 in node, HotSpot in java.
# A short real workload each (tests/targets/node_work.js, JvmWork.java) under
# a glob of the runtime's own C++ functions and under '*': the output is the
# unprofiled one; V8's builtins and runtime functions are refused with their
# reason (agent/instrument.c runtime_frame_reason); the rest of V8 and all of
# libjvm are timed but for the calls generated code makes, counted apart
# (agent/jit_callers.c). tests/targets/jit_caller.c stands for V8's generated
# code moving the return address of a C++ call. No timing checks.
set -u
. "$(dirname "$0")/common.bash"

# run NAME GLOB CMD...: profiles CMD under GLOB into $WORK/NAME.*, checks it
run() {
	local name=$1 glob=$2
	shift 2
	(cd "$WORK" && timeout 600 "$PROFCTL" run --freq 0 --funcs "$glob" -o "$name.pftrace" -- \
		"$@" >"$name.out" 2>"$name.err")
	check_eq "[$glob] exit status" "$?" 0
	check "[$glob] output identical" cmp -s "$WORK/ref.out" "$WORK/$name.out"
	check "[$glob] calls counted" grep -qE '^profctl: calls: [0-9]+ made' "$WORK/$name.err"
}

# Generated code that moves the return address of the C++ it calls (irregexp's
# stack check after a GC moved the regexp): such calls are counted, not
# hijacked; the same function called from C is timed.
JIT="$TARGETS/jit_caller"
"$JIT" >"$WORK/ref.out"
check "jit_caller: the generated code's return was moved" grep -q 'returned 2000 over 1000' \
	"$WORK/ref.out"
for glob in '*MoveReturn*' '*'; do
	run "jit_${glob//[^a-zA-Z]/}" "$glob" "$JIT"
done
check "jit_caller: the calls from generated code are counted apart" grep -qE \
	'^profctl: calls: 2000 made, 1000 recorded, 1000 dropped \(called from generated code: 1000\)' \
	"$WORK/jit_MoveReturn.err"
check "jit_caller: every call is in the function's figures" grep -qE \
	'^profctl: +2000 .*v8::internal::Test::MoveReturn' "$WORK/jit_MoveReturn.err"

if ! command -v node >/dev/null; then
	skip "node: not installed (Debian: nodejs)"
else
	JS="$ROOT/tests/targets/node_work.js"
	node "$JS" >"$WORK/ref.out"
	check "node: the workload runs" test -s "$WORK/ref.out"
	NODE=$(command -v node)
	NODE_MOD=$(basename "$(readlink -f "$NODE")")
	# once: jit_caller above makes the rare case (a GC moving regexp code) every time
	run v8_1 "$NODE_MOD:_ZN2v88internal*" "$NODE" "$JS"
	check "node: V8's C++ is timed" \
		grep -qE '^profctl: +[0-9]+ .*v8::internal::' "$WORK/v8_1.err"
	run node_all '*' "$NODE" "$JS"
	"$PROFCTL" funcs "$NODE_MOD:*Builtin_ErrorConstructor*,$NODE_MOD:Builtins_CEntry*" -- \
		"$NODE" -e 0 >"$WORK/node.funcs" 2>&1
	check "node: a C++ builtin is refused with its reason" grep -q \
		'Builtin_ErrorConstructor.*called from generated code: V8 reads its return address' \
		"$WORK/node.funcs"
	check "node: embedded builtins are refused with their reason" grep -q \
		"Builtins_CEntry.*V8's embedded builtins (generated code)" "$WORK/node.funcs"
fi

if ! command -v java >/dev/null || ! command -v javac >/dev/null; then
	skip "java: java or javac not installed (Debian: default-jdk-headless)"
else
	javac -d "$WORK/classes" "$ROOT/tests/targets/JvmWork.java"
	java -cp "$WORK/classes" JvmWork >"$WORK/ref.out"
	check_eq "java: the workload runs on 4 threads" "$(grep -c '^thread ' "$WORK/ref.out")" 4
	for glob in 'libjvm.so:*Parse*' 'libjvm.so:*' '*'; do
		run "jvm_${glob//[^a-z]/}" "$glob" java -cp "$WORK/classes" JvmWork
	done
	check "java: libjvm's C++ is timed" \
		grep -qE '^profctl: +[0-9]+ .*Parse' "$WORK/jvm_libjvmsoarse.err"
	check "java: libjvm's calls from HotSpot's generated code are counted apart" \
		grep -qE '^profctl: calls: .*called from generated code: [1-9]' "$WORK/jvm_libjvmso.err"
	check "java: under '*', the C libraries are timed" \
		grep -qE '^profctl: functions: [0-9]+ matched, [1-9][0-9]* instrumented' "$WORK/jvm_.err"
	check "java: no crash report" test -z "$(ls "$WORK"/hs_err* 2>/dev/null)"
fi
finish
