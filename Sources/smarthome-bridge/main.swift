import BridgeRuntime
import Foundation

// Everything lives in BridgeRuntime; this file only hands over the command line.
let status = await CommandLineTool.main(arguments: CommandLine.arguments, environment: ProcessInfo.processInfo.environment)
exit(status)
