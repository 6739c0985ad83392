// SPDX-License-Identifier: MIT
// A short real JVM workload for tests/integration/test_runtimes.sh: class
// loading, the interpreter then the JIT (hot loops), GC (short-lived
// objects), exceptions with stack traces, reflection, 4 threads, locks. The
// output depends only on the computation.
import java.util.*;
import java.util.concurrent.*;

public class JvmWork {
	static int depth(int n) {
		if (n == 0)
			throw new IllegalStateException("bottom");
		return depth(n - 1) + 1;
	}

	static long work(int id) {
		long acc = 0;
		Map<String, Integer> m = new HashMap<>();
		for (int i = 0; i < 60000; i++) {
			String k = "k" + (i % 977) + "-" + id;
			m.merge(k, i, Integer::sum);
			acc += k.hashCode() & 0xff;
			if (i % 500 == 0) {
				try {
					depth(20 + i % 7);
				} catch (IllegalStateException e) {
					acc += e.getStackTrace().length;
				}
			}
		}
		List<Integer> l = new ArrayList<>(m.values());
		Collections.sort(l);
		return acc + l.get(l.size() / 2) + m.size();
	}

	public static void main(String[] args) throws Exception {
		ExecutorService pool = Executors.newFixedThreadPool(4);
		List<Future<Long>> fs = new ArrayList<>();
		for (int t = 0; t < 4; t++) {
			final int id = t;
			fs.add(pool.submit(() -> work(id)));
		}
		for (int t = 0; t < 4; t++)
			System.out.println("thread " + t + ": " + fs.get(t).get());
		pool.shutdown();
		System.out.println(String.class.getMethod("length").invoke("reflect"));
	}
}
