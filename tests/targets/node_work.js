// SPDX-License-Identifier: MIT
// A short real Node.js workload for tests/integration/test_runtimes.sh: the
// parser and the JIT (hot loops, new Function), GC, JSON, regular
// expressions, exceptions with their stacks captured (V8 walks its frames),
// C++ bindings that throw (fs on a missing file). The output depends only on
// the computation.
"use strict";
const fs = require("fs");
let acc = 0;
for (let i = 0; i < 3000; i++) {
	const o = JSON.parse(JSON.stringify({ a: i, b: [i, i * 2, "x" + i], c: { d: i % 7 } }));
	acc += o.b[1] + o.c.d;
	try {
		if (i % 100 == 0)
			throw new Error("e" + i);
	} catch (e) {
		acc += e.stack.split("\n").length;
	}
	acc += new Function("x", "return x * " + (i % 13))(i);
}
const arr = [];
for (let i = 0; i < 200000; i++)
	arr.push({ i, s: String(i) });
arr.sort((x, y) => y.i - x.i);
let errs = 0;
for (let i = 0; i < 200; i++) {
	try {
		fs.readFileSync("/nonexistent/" + i);
	} catch (e) {
		errs += e.code === "ENOENT";
	}
}
console.log(acc, arr[0].s, /(\d+)-(\d+)/.exec("12-34")[2], errs, Error().stack.split("\n").length);
