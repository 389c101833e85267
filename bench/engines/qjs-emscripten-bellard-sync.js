// quickjs-emscripten with its default variant: Bellard's QuickJS, sync WASM build.
import { emscriptenAdapter } from "./emscripten.js";

export default emscriptenAdapter({
  id: "wasm-bellard-sync",
  label: "quickjs-emscripten (bellard, sync)",
  variantPackage: "@jitl/quickjs-wasmfile-release-sync",
  asyncify: false,
});
