/**
 * The demo's data source: a small in-memory order book behind two paginated tools, the kind of
 * API an agent would otherwise read page by page into its context. Each tool counts the bytes it
 * hands out, so the demo can show how much stayed inside the sandbox.
 */
import { tool } from "@langchain/core/tools";
import { z } from "zod";

/** One order of the dataset. */
export interface Order {
  id: string;
  region: string;
  customer: string;
  product: string;
  quantity: number;
  unitPrice: number;
  status: "delivered" | "returned" | "cancelled";
  placedAt: string;
  shippingNote: string;
}

const REGIONS = ["north", "south", "east", "west"] as const;
const PRODUCTS: ReadonlyArray<readonly [name: string, unitPrice: number]> = [
  ["trail shoes", 129.0],
  ["rain jacket", 189.5],
  ["wool socks", 14.25],
  ["headlamp", 39.99],
  ["tent 2p", 349.0],
  ["sleeping bag", 219.0],
  ["water filter", 44.5],
  ["camp stove", 74.0],
];
const NOTES = [
  "leave at the front desk",
  "call on arrival",
  "fragile: handle with care",
  "deliver after 5 pm",
  "gift wrap requested",
];
const ORDERS_PER_REGION = 120;
/** Orders per page of `fetch_orders`. */
export const PAGE_SIZE = 40;

/** mulberry32: a tiny seeded PRNG, so every run of the demo sees the same orders. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function pick<T>(next: () => number, items: readonly T[]): T {
  return items[Math.floor(next() * items.length)]!;
}

/** The whole dataset, generated deterministically. */
export function generateOrders(seed = 2026): Order[] {
  const next = random(seed);
  const orders: Order[] = [];
  for (const region of REGIONS) {
    for (let i = 1; i <= ORDERS_PER_REGION; i++) {
      const [product, unitPrice] = pick(next, PRODUCTS);
      const roll = next();
      const day = 1 + Math.floor(next() * 90);
      orders.push({
        id: `${region[0]!.toUpperCase()}-${String(i).padStart(4, "0")}`,
        region,
        customer: `C-${String(1 + Math.floor(next() * 900)).padStart(3, "0")}`,
        product,
        quantity: 1 + Math.floor(next() * 5),
        unitPrice,
        status: roll < 0.78 ? "delivered" : roll < 0.9 ? "returned" : "cancelled",
        placedAt: new Date(Date.UTC(2026, 6, day)).toISOString().slice(0, 10),
        shippingNote: pick(next, NOTES),
      });
    }
  }
  return orders;
}

/** What the tools handed out: calls and bytes of JSON results. */
export interface ToolTraffic {
  calls: number;
  resultBytes: number;
}

/** Builds the two dataset tools over `orders`, counting their traffic into `traffic`. */
export function datasetTools(orders: readonly Order[], traffic: ToolTraffic) {
  const counted = <T>(result: T): T => {
    traffic.calls++;
    traffic.resultBytes += Buffer.byteLength(JSON.stringify(result));
    return result;
  };
  const listRegions = tool(async () => counted([...REGIONS]), {
    name: "list_regions",
    description: "Lists the sales regions of the order book.",
    schema: z.object({}),
  });
  const fetchOrders = tool(
    async ({ region, page }: { region: string; page: number }) => {
      const all = orders.filter((o) => o.region === region);
      const start = (page - 1) * PAGE_SIZE;
      const nextPage = start + PAGE_SIZE < all.length ? page + 1 : null;
      return counted({ orders: all.slice(start, start + PAGE_SIZE), page, nextPage });
    },
    {
      name: "fetch_orders",
      description: `Fetches one page (${PAGE_SIZE} orders) of a region's Q3 orders. Each order has id, region, customer, product, quantity, unitPrice, status (delivered | returned | cancelled), placedAt and shippingNote. Follow nextPage until it is null.`,
      schema: z.object({
        region: z.string().describe("A region from list_regions"),
        page: z.number().int().min(1).describe("Page number, starting at 1"),
      }),
    },
  );
  return [listRegions, fetchOrders];
}

/** The question's answer computed directly on the host, to check the agent's against. */
export function topProductsByDeliveredRevenue(
  orders: readonly Order[],
  n = 3,
): Array<{ product: string; revenue: number }> {
  const revenue = new Map<string, number>();
  for (const o of orders)
    if (o.status === "delivered") revenue.set(o.product, (revenue.get(o.product) ?? 0) + o.quantity * o.unitPrice);
  return [...revenue]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([product, total]) => ({ product, revenue: Math.round(total * 100) / 100 }));
}
