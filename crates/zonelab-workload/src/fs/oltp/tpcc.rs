//! TPC-C as tpcc-mysql runs it on InnoDB: the nine tables in their own `.ibd` files, sized
//! in the proportions of a loaded database (TPC-C's rows per warehouse, InnoDB row sizes
//! with secondary indexes, pages filled 15/16), and the five transactions at the standard mix
//! touching the pages their SQL touches.

use super::innodb::{Access, PageId, Step1, Txn};
use std::collections::VecDeque;
use zonelab_sim::SimRng;

/// Where a table's inserts go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ins {
    /// Never inserted into by the transactions.
    No,
    /// One insertion point (history: InnoDB's row-id clustered index).
    Global,
    /// The end of each district's key range (primary keys start with w_id, d_id).
    PerDistrict,
}

struct TableDef {
    name: &'static str,
    /// Rows per warehouse at load (item: for the whole database).
    rows: u64,
    per_warehouse: bool,
    /// Bytes per row in InnoDB including record header and secondary-index entries.
    row: u64,
    ins: Ins,
}

/// TPC-C's tables in space order (space ids 1..=9).
const TABLES: [TableDef; 9] = [
    TableDef {
        name: "warehouse",
        rows: 1,
        per_warehouse: true,
        row: 100,
        ins: Ins::No,
    },
    TableDef {
        name: "district",
        rows: 10,
        per_warehouse: true,
        row: 110,
        ins: Ins::No,
    },
    TableDef {
        name: "customer",
        rows: 30_000,
        per_warehouse: true,
        row: 700,
        ins: Ins::No,
    },
    TableDef {
        name: "history",
        rows: 30_000,
        per_warehouse: true,
        row: 80,
        ins: Ins::Global,
    },
    TableDef {
        name: "new_orders",
        rows: 9_000,
        per_warehouse: true,
        row: 30,
        ins: Ins::PerDistrict,
    },
    TableDef {
        name: "orders",
        rows: 30_000,
        per_warehouse: true,
        row: 50,
        ins: Ins::PerDistrict,
    },
    TableDef {
        name: "order_line",
        rows: 300_000,
        per_warehouse: true,
        row: 90,
        ins: Ins::PerDistrict,
    },
    TableDef {
        name: "item",
        rows: 100_000,
        per_warehouse: false,
        row: 100,
        ins: Ins::No,
    },
    TableDef {
        name: "stock",
        rows: 100_000,
        per_warehouse: true,
        row: 340,
        ins: Ins::No,
    },
];

const WAREHOUSE: usize = 0;
const DISTRICT: usize = 1;
const CUSTOMER: usize = 2;
const HISTORY: usize = 3;
const NEW_ORDERS: usize = 4;
const ORDERS: usize = 5;
const ORDER_LINE: usize = 6;
const ITEM: usize = 7;
const STOCK: usize = 8;

/// Room for inserts beyond the loaded data of the growing tables, as a share of it.
const INSERT_ROOM: f64 = 0.25;
/// Recent pages remembered per insertion point.
const RING: usize = 8;
/// Share of the customer file holding its secondary index (c_w_id, c_d_id, c_last).
const CUSTOMER_INDEX: f64 = 0.05;

/// Table names in space order.
pub fn table_names() -> [&'static str; 9] {
    TABLES.map(|t| t.name)
}

fn loaded_bytes(t: &TableDef, w: u64) -> f64 {
    let rows = if t.per_warehouse { t.rows * w } else { t.rows };
    rows as f64 * t.row as f64 * 16.0 / 15.0
}

fn weight(t: &TableDef, w: u64) -> f64 {
    let b = loaded_bytes(t, w);
    if t.ins == Ins::No {
        b
    } else {
        b * (1.0 + INSERT_ROOM)
    }
}

/// Warehouses a database of `db` bytes holds at TPC-C's proportions (at least one).
pub fn default_warehouses(db: u64) -> u32 {
    let fixed: f64 = TABLES
        .iter()
        .filter(|t| !t.per_warehouse)
        .map(|t| weight(t, 1))
        .sum();
    let per: f64 = TABLES
        .iter()
        .filter(|t| t.per_warehouse)
        .map(|t| weight(t, 1))
        .sum();
    (((db as f64 - fixed) / per).floor().max(1.0)).min(u32::MAX as f64 / 2.0) as u32
}

/// Pages of each table for `w` warehouses in `db` bytes of `page`-byte pages: the loaded
/// proportions (plus room for inserts) scaled to fill `db`.
pub fn table_pages(db: u64, page: u64, w: u32) -> Result<Vec<u32>, String> {
    let total: f64 = TABLES.iter().map(|t| weight(t, w as u64)).sum();
    let scale = db as f64 / total;
    let pages: Vec<u32> = TABLES
        .iter()
        .map(|t| {
            ((weight(t, w as u64) * scale / page as f64) as u64).clamp(1, u32::MAX as u64) as u32
        })
        .collect();
    let sum: u64 = pages.iter().map(|&p| p as u64).sum();
    if sum < 100 || pages.contains(&0) {
        return Err(format!(
            "db_size {db} holds {sum} pages of {page} bytes for tpcc's nine tables; give it at \
             least 100 pages"
        ));
    }
    Ok(pages)
}

/// An insertion point: the page receiving inserts, its fill, and recent pages.
#[derive(Clone, Debug)]
struct Point {
    tail: u32,
    fill: u64,
    ring: VecDeque<u32>,
}

struct Table {
    space: u16,
    pages: u32,
    /// Rows per page for inserts.
    rpp: u64,
    /// Next page to allocate (wraps around the file).
    cursor: u32,
    points: Vec<Point>,
}

/// The tpcc transaction generator and its tables' insertion state.
pub(crate) struct Tpcc {
    w: u64,
    tables: Vec<Table>,
    c_id: u64,
    c_item: u64,
    c_last: u64,
    redo_update: u32,
}

fn nurand(rng: &mut SimRng, a: u64, x: u64, y: u64, c: u64) -> u64 {
    let r1 = rng.below(a + 1);
    let r2 = x + rng.below(y - x + 1);
    (((r1 | r2) + c) % (y - x + 1)) + x
}

impl Tpcc {
    /// Tables in spaces `first..first + 9` with `pages` each.
    pub fn new(
        w: u32,
        first: u16,
        pages: &[u32],
        page: u64,
        redo_update: u32,
        rng: &mut SimRng,
    ) -> Tpcc {
        let w = w as u64;
        let k = w * 10;
        let tables = TABLES
            .iter()
            .zip(pages)
            .enumerate()
            .map(|(i, (t, &pages))| {
                let loaded = if t.ins == Ins::No {
                    pages
                } else {
                    ((pages as f64 / (1.0 + INSERT_ROOM)) as u32).clamp(1, pages)
                };
                let npoints = match t.ins {
                    Ins::No => 0,
                    Ins::Global => 1,
                    Ins::PerDistrict => k,
                };
                let rpp = (page * 15 / 16 / t.row).max(1);
                let points = (0..npoints)
                    .map(|p| {
                        let lo = (p * loaded as u64 / npoints) as u32;
                        let hi = (((p + 1) * loaded as u64 / npoints) as u32).max(lo + 1);
                        let hi = hi.min(loaded).max(lo.min(loaded - 1) + 1);
                        let lo = lo.min(hi - 1);
                        let from = hi.saturating_sub(RING as u32).max(lo);
                        Point {
                            tail: hi - 1,
                            fill: rng.below(rpp),
                            ring: (from..hi).collect(),
                        }
                    })
                    .collect();
                Table {
                    space: first + i as u16,
                    pages,
                    rpp,
                    cursor: if loaded < pages { loaded } else { 0 },
                    points,
                }
            })
            .collect();
        Tpcc {
            w,
            tables,
            c_id: rng.below(1024),
            c_item: rng.below(8192),
            c_last: rng.below(256),
            redo_update,
        }
    }

    fn at(&self, t: usize, key: u64, keys: u64) -> PageId {
        let tb = &self.tables[t];
        let page = (key as u128 * tb.pages as u128 / keys.max(1) as u128) as u32;
        PageId {
            space: tb.space,
            page: page.min(tb.pages - 1),
        }
    }

    fn read(&self, t: usize, key: u64, keys: u64) -> Step1 {
        Step1 {
            page: self.at(t, key, keys),
            access: Access::Read,
            redo: 0,
        }
    }

    fn modify(&self, t: usize, key: u64, keys: u64) -> Step1 {
        Step1 {
            page: self.at(t, key, keys),
            access: Access::Modify,
            redo: self.redo_update,
        }
    }

    fn ring_page(&self, t: usize, point: u64, which: Which, rng: &mut SimRng) -> PageId {
        let tb = &self.tables[t];
        let r = &tb.points[point as usize].ring;
        let page = match which {
            Which::Oldest => r[0],
            Which::Newest(back) => r[r.len().saturating_sub(1 + back)],
            Which::Any => r[rng.below(r.len() as u64) as usize],
        };
        PageId {
            space: tb.space,
            page,
        }
    }

    /// Inserts a row at insertion point `point` of table `t`.
    fn insert(&mut self, t: usize, point: u64) -> Step1 {
        let row = TABLES[t].row;
        let tb = &mut self.tables[t];
        let p = &mut tb.points[point as usize];
        let redo = (row + 40) as u32;
        if p.fill < tb.rpp {
            p.fill += 1;
            return Step1 {
                page: PageId {
                    space: tb.space,
                    page: p.tail,
                },
                access: Access::Modify,
                redo,
            };
        }
        let page = tb.cursor;
        tb.cursor = (tb.cursor + 1) % tb.pages;
        p.tail = page;
        p.fill = 1;
        p.ring.push_back(page);
        if p.ring.len() > RING {
            p.ring.pop_front();
        }
        Step1 {
            page: PageId {
                space: tb.space,
                page,
            },
            access: Access::Create,
            redo: redo + 100,
        }
    }

    fn customer(
        &self,
        rng: &mut SimRng,
        w: u64,
        d: u64,
        steps: &mut Vec<Step1>,
        modify: bool,
    ) -> u32 {
        let rows = self.w * 30_000;
        let tb = &self.tables[CUSTOMER];
        let data = ((tb.pages as f64 * (1.0 - CUSTOMER_INDEX)) as u32).max(1);
        let mut statements = 1;
        if rng.below(100) < 60 && data < tb.pages {
            // By last name: the secondary index, then the row.
            let idx = tb.pages - data;
            let name = (w * 10 + d) * 1000 + nurand(rng, 255, 0, 999, self.c_last);
            let page = data + (name as u128 * idx as u128 / (self.w * 10_000) as u128) as u32;
            steps.push(Step1 {
                page: PageId {
                    space: tb.space,
                    page: page.min(tb.pages - 1),
                },
                access: Access::Read,
                redo: 0,
            });
            statements += 1;
        }
        let c = (w * 10 + d) * 3000 + nurand(rng, 1023, 1, 3000, self.c_id) - 1;
        let page = (c as u128 * data as u128 / rows as u128) as u32;
        steps.push(Step1 {
            page: PageId {
                space: tb.space,
                page: page.min(data - 1),
            },
            access: if modify { Access::Modify } else { Access::Read },
            redo: self.redo_update,
        });
        statements
    }

    fn item(&self, rng: &mut SimRng) -> u64 {
        nurand(rng, 8191, 1, 100_000, self.c_item) - 1
    }

    /// The next transaction, in tpcc's mix: new-order 45%, payment 43%, order-status,
    /// delivery and stock-level 4% each.
    pub fn next(&mut self, rng: &mut SimRng) -> Txn {
        let w = rng.below(self.w);
        let d = rng.below(10);
        let dk = w * 10 + d;
        let nd = self.w * 10;
        let mut steps = Vec::new();
        let r = rng.below(100);
        let (name, statements) = if r < 45 {
            // new-order: warehouse and customer, district's next order id, the order and
            // new-order rows, then per item its row, its stock row, an order line.
            steps.push(self.read(WAREHOUSE, w, self.w));
            self.customer(rng, w, d, &mut steps, false);
            steps.push(self.modify(DISTRICT, dk, nd));
            steps.push(self.insert(ORDERS, dk));
            steps.push(self.insert(NEW_ORDERS, dk));
            let lines = 5 + rng.below(11);
            for _ in 0..lines {
                let i = self.item(rng);
                steps.push(self.read(ITEM, i, 100_000));
                let sw = if self.w > 1 && rng.below(100) == 0 {
                    rng.below(self.w)
                } else {
                    w
                };
                steps.push(self.modify(STOCK, sw * 100_000 + i, self.w * 100_000));
                steps.push(self.insert(ORDER_LINE, dk));
            }
            ("new_order", 6 + 4 * lines as u32)
        } else if r < 88 {
            // payment: warehouse and district year-to-date, the customer (15% of another
            // warehouse), a history row.
            steps.push(self.modify(WAREHOUSE, w, self.w));
            steps.push(self.modify(DISTRICT, dk, nd));
            let (cw, cd) = if self.w > 1 && rng.below(100) < 15 {
                (rng.below(self.w), rng.below(10))
            } else {
                (w, d)
            };
            let s = self.customer(rng, cw, cd, &mut steps, true);
            steps.push(self.insert(HISTORY, 0));
            ("payment", 6 + s)
        } else if r < 92 {
            // order-status: the customer, its last order and that order's lines.
            let s = self.customer(rng, w, d, &mut steps, false);
            let o = self.ring_page(ORDERS, dk, Which::Any, rng);
            steps.push(Step1 {
                page: o,
                access: Access::Read,
                redo: 0,
            });
            let n = 1 + rng.below(2) as usize;
            for _ in 0..n {
                let p = self.ring_page(ORDER_LINE, dk, Which::Any, rng);
                steps.push(Step1 {
                    page: p,
                    access: Access::Read,
                    redo: 0,
                });
            }
            ("order_status", 2 + s)
        } else if r < 96 {
            // delivery: per district the oldest new order deleted, its order's carrier and
            // its lines' delivery date set, the customer's balance.
            for d in 0..10 {
                let dk = w * 10 + d;
                for (t, lines) in [(NEW_ORDERS, 1), (ORDERS, 1), (ORDER_LINE, 2)] {
                    let mut seen = Vec::new();
                    for back in 0..lines {
                        let page = if back == 0 {
                            self.ring_page(t, dk, Which::Oldest, rng)
                        } else {
                            let r = &self.tables[t].points[dk as usize].ring;
                            PageId {
                                space: self.tables[t].space,
                                page: r[1.min(r.len() - 1)],
                            }
                        };
                        if !seen.contains(&page) {
                            seen.push(page);
                            steps.push(Step1 {
                                page,
                                access: Access::Modify,
                                redo: self.redo_update,
                            });
                        }
                    }
                }
                let c = dk * 3000 + rng.below(3000);
                let tb = &self.tables[CUSTOMER];
                let data = ((tb.pages as f64 * (1.0 - CUSTOMER_INDEX)) as u32).max(1);
                let page = (c as u128 * data as u128 / (self.w * 30_000) as u128) as u32;
                steps.push(Step1 {
                    page: PageId {
                        space: tb.space,
                        page: page.min(data - 1),
                    },
                    access: Access::Modify,
                    redo: self.redo_update,
                });
            }
            ("delivery", 70)
        } else {
            // stock-level: the district, the lines of its last 20 orders, and the stock rows
            // of their items (about 200).
            steps.push(self.read(DISTRICT, dk, nd));
            for back in 0..2 {
                let p = self.ring_page(ORDER_LINE, dk, Which::Newest(back), rng);
                steps.push(Step1 {
                    page: p,
                    access: Access::Read,
                    redo: 0,
                });
            }
            for _ in 0..200 {
                let i = self.item(rng);
                steps.push(self.read(STOCK, w * 100_000 + i, self.w * 100_000));
            }
            ("stock_level", 2)
        };
        Txn {
            name,
            steps,
            statements,
        }
    }
}

#[derive(Clone, Copy)]
enum Which {
    Oldest,
    Newest(usize),
    Any,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_have_tpcc_proportions() {
        let w = default_warehouses(12 << 30);
        assert!((110..160).contains(&w), "{w} warehouses in 12 GiB");
        let pages = table_pages(12 << 30, 16 << 10, w).unwrap();
        let sum: u64 = pages.iter().map(|&p| p as u64).sum();
        assert!(sum * (16 << 10) <= 12 << 30);
        assert!(sum * (16 << 10) > (12u64 << 30) * 99 / 100);
        // stock and order_line are the big ones; item is about 10 MB.
        assert!(pages[STOCK] > pages[CUSTOMER] && pages[ORDER_LINE] > pages[CUSTOMER]);
        assert!((500..800).contains(&pages[ITEM]), "{}", pages[ITEM]);
        assert!(table_pages(1 << 20, 16 << 10, 1).is_err());
    }

    #[test]
    fn inserts_fill_pages_then_allocate_at_the_cursor() {
        let pages = table_pages(64 << 20, 16 << 10, 1).unwrap();
        let mut t = Tpcc::new(1, 1, &pages, 16 << 10, 200, &mut SimRng::new(1));
        let mut created = 0;
        let mut last = None;
        for _ in 0..2000 {
            let s = t.insert(HISTORY, 0);
            if s.access == Access::Create {
                if let Some(l) = last {
                    assert_eq!(s.page.page, (l + 1) % pages[HISTORY]);
                }
                last = Some(s.page.page);
                created += 1;
            } else {
                assert_eq!(s.access, Access::Modify);
            }
            assert!(s.page.page < pages[HISTORY]);
        }
        let rpp = (16 << 10) * 15 / 16 / 80;
        assert!((created as i64 - 2000 / rpp as i64).abs() <= 1, "{created}");
    }
}
