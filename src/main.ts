// `npm start`: the server on this process. Exit at once when it has stopped: the exit code is
// the server's, and nothing may keep a stopped broker's process alive.
import { serve } from "./serve.ts";

process.exit(await serve());
