// quickjs-emscripten with the QuickJS-ng sync WASM build.
import { emscriptenAdapter } from "./emscripten.js";

export default emscriptenAdapter({
  id: "wasm-ng-sync",
  label: "quickjs-emscripten (ng, sync)",
  variantPackage: "@jitl/quickjs-ng-wasmfile-release-sync",
  asyncify: false,
});
