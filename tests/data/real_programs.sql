-- Workload for tests/integration/test_real_programs.sh: the sqlite3 shell on a
-- fresh file database. Output must not depend on time, locale or paths.
PRAGMA journal_mode = DELETE;
CREATE TABLE customer(id INTEGER PRIMARY KEY, name TEXT NOT NULL, city TEXT);
CREATE TABLE orders(id INTEGER PRIMARY KEY, cust INTEGER REFERENCES customer(id),
                    amount REAL, day TEXT);
BEGIN;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
INSERT INTO customer SELECT i, printf('cust%04d', i), printf('city%02d', i % 37) FROM n;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 6000)
INSERT INTO orders
  SELECT i, (i * 7919) % 2000 + 1, (i * 37 % 1000) / 10.0,
         date('2024-01-01', printf('+%d days', i % 366))
  FROM n;
COMMIT;
CREATE INDEX orders_cust ON orders(cust);
CREATE INDEX customer_city ON customer(city, name);

SELECT c.city, count(*), printf('%.2f', sum(o.amount)), printf('%.2f', avg(o.amount))
  FROM customer c JOIN orders o ON o.cust = c.id
  GROUP BY c.city ORDER BY sum(o.amount) DESC, c.city LIMIT 8;
SELECT name, (SELECT count(*) FROM orders WHERE cust = customer.id) AS n
  FROM customer ORDER BY n DESC, name LIMIT 5;
SELECT strftime('%m', day) AS m, count(*), max(amount), min(amount)
  FROM orders GROUP BY m HAVING count(*) > 400 ORDER BY m;
SELECT c.name, o.id, o.amount,
       rank() OVER (PARTITION BY c.city ORDER BY o.amount DESC, o.id) AS r
  FROM customer c JOIN orders o ON o.cust = c.id
  WHERE c.city = 'city07' ORDER BY r, o.id LIMIT 6;

BEGIN;
UPDATE orders SET amount = amount * 2 WHERE cust % 10 = 0;
DELETE FROM orders WHERE amount > 99.5;
SAVEPOINT sp;
DELETE FROM customer WHERE id > 100;
ROLLBACK TO sp;
RELEASE sp;
COMMIT;
CREATE VIEW big AS SELECT cust, sum(amount) AS total FROM orders GROUP BY cust;
SELECT count(*), printf('%.1f', max(total)), printf('%.1f', min(total)) FROM big;
ALTER TABLE customer RENAME COLUMN city TO town;
SELECT town, group_concat(name, ',') FROM
  (SELECT town, name FROM customer WHERE id <= 12 ORDER BY town, name) GROUP BY town;
SELECT printf('%5d|%-10s|%8.3f|%x', count(DISTINCT cust), upper('done'), total(amount), 48879)
  FROM orders;
SELECT * FROM no_such_table;
PRAGMA integrity_check;
SELECT count(*) FROM customer;
