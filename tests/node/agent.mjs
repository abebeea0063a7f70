// A small tool loop on the official `openai` npm package, pointed at the proxy by
// OPENAI_BASE_URL. Asks about the order in argv[2]; prints the final answer.
import OpenAI from "openai";

const client = new OpenAI({ apiKey: process.env.OPENAI_API_KEY, maxRetries: 0 });
const tools = ["lookup_order", "check_stock", "send_email"].map((name) => ({
  type: "function",
  function: { name, parameters: { type: "object", properties: {} } },
}));
const run = (name, args) =>
  JSON.stringify(name === "lookup_order" ? { sku: `SKU-${args.order_id}` } : { ok: true });

const messages = [
  { role: "system", content: "You are the shop's order assistant." },
  { role: "user", content: `where is order ${process.argv[2]}` },
];
const stream = process.argv[3] === "stream";
for (;;) {
  let message;
  if (stream) {
    const events = await client.chat.completions.create({ model: "fake-1", messages, tools, stream: true });
    const calls = [];
    let content = "";
    for await (const chunk of events) {
      const delta = chunk.choices[0]?.delta ?? {};
      content += delta.content ?? "";
      for (const piece of delta.tool_calls ?? []) {
        calls[piece.index] ??= { id: piece.id, type: "function", function: { name: "", arguments: "" } };
        calls[piece.index].function.name += piece.function?.name ?? "";
        calls[piece.index].function.arguments += piece.function?.arguments ?? "";
      }
    }
    message = { role: "assistant", content: content || null, ...(calls.length ? { tool_calls: calls } : {}) };
  } else {
    const completion = await client.chat.completions.create({ model: "fake-1", messages, tools });
    message = completion.choices[0].message;
  }
  messages.push(message);
  if (!message.tool_calls?.length) {
    console.log(message.content);
    break;
  }
  for (const call of message.tool_calls) {
    messages.push({ role: "tool", tool_call_id: call.id, content: run(call.function.name, JSON.parse(call.function.arguments)) });
  }
}
